// What voices ask of workflows, as a port: a workflow's cloned voice set, or taken off the workflows
// of a voice being deleted. Declared here and implemented by src/workflows (workflow-voices.ts), the
// writer of workflows, which builds on voices (its catalogue): voices never imports workflows.
import { Context } from "effect"
import type { Tx } from "../platform/Db.js"

export interface WorkflowVoicesPort {
  /** Inside the caller's transaction: the workflow speaks with this cloned voice (null: its persona's again). */
  readonly assign: (tx: Tx, workflowId: number, voiceId: number | null) => Promise<void>
  /** Inside the caller's transaction: every workflow speaking with this voice goes back to its persona's. */
  readonly unassignEverywhere: (tx: Tx, voiceId: number) => Promise<void>
}

export class WorkflowVoices extends Context.Tag("parley/WorkflowVoices")<WorkflowVoices, WorkflowVoicesPort>() {}
