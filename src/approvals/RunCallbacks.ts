// What approvals ask of runs, as a port: an approved callback becomes a new attempt on its run, and
// a decision made after its call writes the target's result. Declared here and implemented by
// src/runs (run-callbacks.ts), so approvals never imports runs.
import { Context } from "effect"
import type { Tx } from "../platform/Db.js"

export interface RunCallbacksPort {
  /**
   * Inside the deciding transaction: the target of a call that has ended is dialed again at `at`
   * (a finished run opens again for it). False when the target is not waiting on that call any more.
   */
  readonly scheduleCallback: (tx: Tx, runId: number, runTargetId: number, at: Date) => Promise<boolean>
  /**
   * Inside the deciding transaction: the target's result becomes `outcome` if its call ended owing the
   * decision (done, pending_approval); otherwise it stays as it is.
   */
  readonly recordLateOutcome: (tx: Tx, runTargetId: number, outcome: string) => Promise<void>
}

export class RunCallbacks extends Context.Tag("parley/RunCallbacks")<RunCallbacks, RunCallbacksPort>() {}
