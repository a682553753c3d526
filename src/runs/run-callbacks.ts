// Runs' side of the approvals' RunCallbacks port (src/approvals/RunCallbacks.ts): an approved
// callback reschedules its target through runs.repo, a decision after the call writes the target's
// result through run-targets.repo. The layer is wired in src/main/app.layer.ts.
import { Layer } from "effect"
import { RunCallbacks, type RunCallbacksPort } from "../approvals/RunCallbacks.js"
import { recordLateOutcome } from "./run-targets.repo.js"
import { scheduleCallback } from "./runs.repo.js"

/** The port itself, for callers outside Effect (the runtime's call ends). */
export const runCallbacks: RunCallbacksPort = { scheduleCallback, recordLateOutcome }

export const RunCallbacksLive: Layer.Layer<RunCallbacks> = Layer.succeed(RunCallbacks, runCallbacks)
