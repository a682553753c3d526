// A supervisor takes a live call over: the callee is patched in to an operator by the one patch-in
// path (src/outreach/patch-in.service.ts), and the audit log says who did it, to which number, with what result.
import { Effect } from "effect"
import { type AuditActor, recordAudit } from "../audit/audit.repo.js"
import { patchIn } from "../outreach/patch-in.service.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Db } from "../platform/Db.js"

/**
 * Hands the workspace's live call `callId` over to `operatorNumber` (default OPERATOR_NUMBER). A call
 * no longer live is 409 CALL_NOT_LIVE (the supervisor saw it live), one already handed off 409
 * CALL_HANDED_OFF, another workspace's or an unknown one 404. Audited when the runtime acted on it:
 * `call.taken_over`, or `call.take_over_failed` when the conference could not be set up (the call then
 * ends handoff_failed, so that too is someone's doing); a refusal changed nothing and is not logged.
 */
export const takeOverCall = (actor: AuditActor, callId: number, operatorNumber: string | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const audit = (action: string, after: Record<string, unknown>) =>
      Effect.promise(() => recordAudit(sql, actor, { action, target: `call:${callId}`, after }))
    return yield* patchIn(actor.tenantId, callId, operatorNumber, { notLive: "conflict" }).pipe(
      Effect.tap((r) =>
        audit("call.taken_over", {
          run_id: r.run_id,
          status: r.status,
          conference_id: r.conference_id,
          operator_number: r.operator_number,
        }),
      ),
      Effect.tapErrorTag("GatewayUnavailable", (e) =>
        audit("call.take_over_failed", {
          operator_number: operatorNumber ?? config.operatorNumber ?? null,
          error: e.message,
        }),
      ),
    )
  })
