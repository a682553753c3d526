// npm run bench [-- NAME...]: runs the named benches (all when none is named), one after another.
import { benchAnalysis } from "./analysis.js"
import { benchAnalytics } from "./analytics.js"
import { benchApprovals } from "./approvals.js"
import { benchAudience } from "./audience.js"
import { benchAuth } from "./auth.js"
import { benchDialer } from "./dialer.js"
import { benchDsr } from "./dsr.js"
import { benchFootprint } from "./footprint.js"
import { benchHttp } from "./http.js"
import { benchKb } from "./kb.js"
import { benchLedger } from "./ledger.js"
import { benchRamp } from "./ramp.js"
import { benchReads } from "./reads.js"
import { benchRecordingCodec } from "./recording-codec.js"
import { benchResults } from "./results.js"
import { benchSim } from "./sim.js"
import { benchSse } from "./sse.js"
import { benchTakeover } from "./takeover.js"
import { benchTurns } from "./turns.js"
import { benchVoice } from "./voice.js"
import { benchWebhooks } from "./webhooks.js"

const benches: Record<string, () => Promise<void>> = {
  http: benchHttp,
  auth: benchAuth,
  ledger: benchLedger,
  audience: benchAudience,
  dialer: benchDialer,
  ramp: benchRamp,
  takeover: benchTakeover,
  sse: benchSse,
  approvals: benchApprovals,
  kb: benchKb,
  sim: benchSim,
  dsr: benchDsr,
  turns: benchTurns,
  reads: benchReads,
  results: benchResults,
  footprint: benchFootprint,
  webhooks: benchWebhooks,
  analysis: benchAnalysis,
  analytics: benchAnalytics,
  "recording-codec": benchRecordingCodec,
  voice: benchVoice,
}

const names = process.argv.slice(2).filter((a) => a !== "--")
for (const name of names.length > 0 ? names : Object.keys(benches)) {
  const run = benches[name]
  if (!run) {
    process.stderr.write(`unknown bench ${name}; known: ${Object.keys(benches).join(", ")}\n`)
    process.exit(2)
  }
  process.stdout.write(`# bench ${name}\n`)
  await run()
}
