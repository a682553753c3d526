// Approvals: listing them (the polling equivalents of approval.requested / approval.resolved, and a
// supervisor's queue by time left) and deciding them. The decision is made in Postgres first, with
// what it does to its call (late-decisions.ts: heard by a callee still holding, or written into the
// result of a call that has ended; an approved callback after the call becomes a new attempt); then
// the runtime process holding the call hears of it on the bus and the conversation resumes. Every
// change is announced on approvals.<tenant> for the workspace's live queue (GET /api/approvals/stream).
import { Effect } from "effect"
import type { Principal } from "../auth/principal.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus, publishOrWarn } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Conflict, NotFound, ValidationFailed } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import type { StreamSink } from "../platform/live-hub.js"
import { formatAmount } from "../platform/money.js"
import { type ApprovalDecided, RT_APPROVAL_DECIDED } from "../platform/subjects.js"
import { iso } from "../platform/time.js"
import { approvalObject } from "../webhooks/event-data.js"
import { ApprovalStreams } from "./ApprovalStreams.js"
import { announceApprovalChange } from "./approval-changes.js"
import * as queue from "./approval-queue.repo.js"
import { observeApprovalDecision } from "./approvals.metrics.js"
import * as repo from "./approvals.repo.js"
import { decisionEffects } from "./late-decisions.js"
import { RunCallbacks } from "./RunCallbacks.js"

export { CALLBACK_DELAY_MS } from "./late-decisions.js"

/** The approval object of GET /api/approvals, built as the approval.* events build theirs. */
export const approvalView = (r: repo.ApprovalRow) => approvalObject(r)

export const listApprovals = (tenantId: number, f: queue.ListFilter) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => queue.listApprovals(sql, tenantId, f))
    return rows.map(approvalView)
  })

const badValue = (message: string) =>
  new ValidationFailed({ message: `value_minor ${message}`, errors: [{ field: "value_minor", message }] })

/**
 * An approver's amount for a concession: only with approve, only for a concession, above 0 and at
 * most the cap of the rule book its run follows. Checked before the decision is tried, so a refused
 * amount decides nothing.
 */
const checkValue = (tenantId: number, approvalId: number, decision: "approve" | "deny", valueMinor: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const target = yield* Effect.promise(() => repo.decisionTarget(sql, tenantId, approvalId))
    if (target === undefined) return yield* Effect.fail(new NotFound({ message: `approval ${approvalId} not found` }))
    if (decision !== "approve") return yield* Effect.fail(badValue("is only for decision approve"))
    if (target.proposed_action !== "concession")
      return yield* Effect.fail(badValue(`is only for a concession (this approval is a ${target.proposed_action})`))
    const cap = target.cap_minor ?? 0
    if (valueMinor <= 0 || valueMinor > cap)
      return yield* Effect.fail(
        badValue(
          `must be greater than 0 and at most the rule book's concession cap of ${cap} ` +
            `(${formatAmount(cap, target.currency)})`,
        ),
      )
  })

export const decideApproval = (
  caller: Principal,
  approvalId: number,
  decision: "approve" | "deny",
  note: string | null,
  valueMinor?: number | undefined,
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const bus = yield* Bus
    const log = yield* Log
    const config = yield* AppConfig
    const runs = yield* RunCallbacks
    if (valueMinor !== undefined) yield* checkValue(caller.tenantId, approvalId, decision, valueMinor)
    const status = decision === "approve" ? "approved" : "denied"
    const outcome = yield* Effect.promise(() =>
      repo.decide(
        sql,
        {
          tenantId: caller.tenantId,
          approvalId,
          status,
          userId: caller.kind === "user" ? caller.userId : null,
          apiKeyId: caller.kind === "api_key" ? caller.keyId : null,
          note,
          valueMinor,
        },
        decisionEffects(config.simTimeScale, runs),
      ),
    )
    if (outcome.kind === "not_found")
      return yield* Effect.fail(new NotFound({ message: `approval ${approvalId} not found` }))
    if (outcome.kind === "conflict")
      return yield* Effect.fail(
        new Conflict({
          code: outcome.status === "expired" ? "APPROVAL_EXPIRED" : "APPROVAL_ALREADY_DECIDED",
          message:
            outcome.status === "expired"
              ? `approval ${approvalId} has expired`
              : `approval ${approvalId} was already ${outcome.status}`,
          details: { status: outcome.status },
        }),
      )
    const row = outcome.row
    observeApprovalDecision(row.created_at, row.decided_at)
    // The call, if still live somewhere, resumes as soon as its runtime process hears this.
    const message: ApprovalDecided & { decided_by: number | null } = {
      approval_id: row.id,
      call_id: row.call_id,
      run_id: row.run_id,
      status,
      value_minor: row.approved_value_minor,
      decided_by: row.decided_by,
    }
    yield* publishOrWarn(RT_APPROVAL_DECIDED, message, "could not announce an approval decision", {
      approval_id: row.id,
    })
    // The supervisors' queues: the decision leaves every other screen at once.
    announceApprovalChange(bus, log, caller.tenantId, { approvalId: row.id, status, at: row.decided_at ?? new Date() })
    return {
      id: row.id,
      status,
      decided_at: iso(row.decided_at),
      decided_by: row.decided_by,
      note: row.note,
      approved_value_minor: row.approved_value_minor,
      phase: row.decided_phase,
      effect: row.effect,
    }
  })

/**
 * The function that serves one watcher of the workspace's approval changes: join the workspace's
 * subscription, tell EventSource how soon to reconnect, send the pending count, then pass each change
 * (and the count after it) on until the client leaves (or is dropped, or its credential is revoked:
 * the server ends the stream).
 */
export const openApprovalStream = (tenantId: number) =>
  Effect.gen(function* () {
    const h = yield* ApprovalStreams
    return async (sink: StreamSink & { onClose(cb: () => void): void }): Promise<void> => {
      const watcher = await h.join(tenantId, sink)
      const closed = new Promise<void>((resolve) => sink.onClose(resolve))
      void closed.then(() => h.leave(watcher))
      if (!(await sink.write("retry: 2000\n\n"))) return
      // The count as it stands once the subscription is up: every later change brings a fresh one.
      h.count(tenantId, watcher)
      await closed
    }
  })
