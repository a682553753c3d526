// Tells every runtime process that a workspace's rules changed, so running calls reload them on
// their next turn. Called after the change commits; a lost message is logged, never fatal.
import { Effect } from "effect"
import { publishOrWarn } from "../platform/Bus.js"
import { type KbRulesChanged, kbRulesChangedSubject } from "../platform/subjects.js"

/** Publishes kb.rules.<tenant> with the workflow whose rules changed (null: workspace-wide ones). */
export const announceRulesChanged = (tenantId: number, workflowId: number | null) =>
  Effect.gen(function* () {
    const message: KbRulesChanged = { tenant_id: tenantId, workflow_id: workflowId }
    yield* publishOrWarn(kbRulesChangedSubject(tenantId), message, "could not announce a rule change", {
      tenant_id: tenantId,
      workflow_id: workflowId,
    })
  })
