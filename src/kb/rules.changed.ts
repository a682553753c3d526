// Tells every runtime process that a workspace's rules changed, so running calls reload them on
// their next turn. Called after the change commits; a lost message is logged, never fatal.
import { Effect } from "effect"
import { Bus } from "../platform/Bus.js"
import { Log } from "../platform/Log.js"
import { type KbRulesChanged, kbRulesChangedSubject } from "../platform/subjects.js"

/** Publishes kb.rules.<tenant> with the workflow whose rules changed (null: workspace-wide ones). */
export const announceRulesChanged = (tenantId: number, workflowId: number | null) =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const log = yield* Log
    const message: KbRulesChanged = { tenant_id: tenantId, workflow_id: workflowId }
    yield* Effect.try(() => bus.publish(kbRulesChangedSubject(tenantId), message)).pipe(
      Effect.catchAll((err) =>
        Effect.sync(() =>
          log.warn({ err, tenant_id: tenantId, workflow_id: workflowId }, "could not announce a rule change"),
        ),
      ),
    )
  })
