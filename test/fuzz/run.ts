// `npm run fuzz`: the long fuzz. 20,000 requests (FUZZ_REQUESTS) against a server in its own
// process; fails on any violation or when the server's RSS keeps growing after warm-up
// (FUZZ_RSS_GROWTH_MB, default 64). FUZZ_SEED repeats a run; DATABASE_URL / NATS_URL use real services.
import { fuzz, rssGrowth, rssOf, warmLow } from "./fuzzer.js"
import { startFuzzServer } from "./server.js"

const MiB = 1024 * 1024
const requests = Number(process.env.FUZZ_REQUESTS ?? 20_000)
const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31)
const concurrency = Number(process.env.FUZZ_CONCURRENCY ?? 8)
const growthLimit = Number(process.env.FUZZ_RSS_GROWTH_MB ?? 64) * MiB

const server = await startFuzzServer()
let failed = false
try {
  console.log(`fuzzing ${server.url} (pid ${server.pid}): ${requests} requests, seed ${seed}`)
  const report = await fuzz({
    base: server.url,
    pid: server.pid,
    requests,
    seed,
    concurrency,
    systemKey: server.systemKey,
    onProgress: (done, rss) => {
      if (done % 2_000 === 0) console.log(`  ${done} sent, server RSS ${(rss / MiB).toFixed(1)} MiB`)
    },
  })
  // The collector gives memory back once allocation stops: the RSS after a quiet spell is what the
  // run left behind, against the lowest sample of its third quarter.
  await new Promise((r) => setTimeout(r, 15_000))
  const settled = rssOf(server.pid)
  const growth = Math.min(rssGrowth(report.rss), settled - warmLow(report.rss))
  console.log(`sent ${report.sent} in ${(report.ms / 1000).toFixed(1)} s; answers by status:`, report.byStatus)
  const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`
  console.log(
    `server RSS: ${mib(report.rss[0]![1])} at start, ${mib(report.rss.at(-1)![1])} at the end; ` +
      `${mib(settled)} after 15 s idle; growth over the second half ${mib(growth)}`,
  )
  console.log("slowest answers:", report.slowest)
  for (const v of report.violations) console.log(`VIOLATION ${v.problem}\n  ${JSON.stringify(v.case)}`)
  for (const e of server.errors.slice(0, 20)) console.log(`server error log: ${JSON.stringify(e).slice(0, 600)}`)
  if (report.violations.length > 0) failed = true
  if (growth > growthLimit) {
    console.log(`RSS grew ${(growth / MiB).toFixed(1)} MiB over the second half (limit ${growthLimit / MiB} MiB)`)
    failed = true
  }
  console.log(failed ? `FAILED (seed ${seed})` : "passed")
} finally {
  await server.stop()
}
process.exit(failed ? 1 : 0)
