// Runs' side of the approvals' RunCallbacks port (src/approvals/RunCallbacks.ts): an approved
// callback reschedules its target through runs.repo. The layer is wired in src/main/app.layer.ts.
import { Layer } from "effect"
import { RunCallbacks, type RunCallbacksPort } from "../approvals/RunCallbacks.js"
import { scheduleCallback } from "./runs.repo.js"

/** The port itself, for callers outside Effect (the runtime's call ends). */
export const runCallbacks: RunCallbacksPort = { scheduleCallback }

export const RunCallbacksLive: Layer.Layer<RunCallbacks> = Layer.succeed(RunCallbacks, runCallbacks)
