// The voice pipeline's metrics: each agent turn's latency by stage, barge-ins, and the stages that failed.
import { FastCounter, FastHistogram } from "../../src/platform/metrics.js"
import type { TurnLatency } from "../../src/providers/telephony/telephony.interface.js"

const latency = new FastHistogram(
  "parley_voice_turn_latency_seconds",
  "Agent turns of calls heard as audio: from the end of the callee's speech to the agent's first audio (stage " +
    '"total"), and each stage of it (endpointing, transcript, model, synthesis, hop)',
  [0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10],
)
const STAGES = ["total", "endpointing", "transcript", "model", "synthesis", "hop"] as const
const byStage = Object.fromEntries(STAGES.map((s) => [s, latency.child({ stage: s })])) as Record<
  (typeof STAGES)[number],
  { observe(v: number): void }
>

export const observeTurnLatency = (l: TurnLatency): void => {
  for (const s of STAGES) byStage[s].observe(l[s] / 1000)
}

const bargeIns = new FastCounter(
  "parley_voice_barge_ins_total",
  "Agent turns the callee spoke over (the carrier cleared)",
)
export const bargeIn = bargeIns.child()

const failures = new FastCounter(
  "parley_voice_failures_total",
  "Voice pipeline failures in calls, by stage (synthesis, recognition, stream: the carrier's stream never started)",
)
export const voiceFailure = {
  synthesis: failures.child({ stage: "synthesis" }),
  recognition: failures.child({ stage: "recognition" }),
  stream: failures.child({ stage: "stream" }),
}

const recordings = new FastCounter(
  "parley_recordings_total",
  'Recordings of calls heard as audio, by result ("saved", or "failed": encoding or the store failed)',
)
export const recordingsSaved = recordings.child({ result: "saved" })
export const recordingFailures = recordings.child({ result: "failed" })
