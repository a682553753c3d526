// Approvals: listing them (the polling equivalents of approval.requested / approval.resolved) and
// deciding them. The decision is made in Postgres first; then the runtime process holding the
// call hears of it on the bus and the conversation resumes. A callback approved after its call
// ended is scheduled as a new attempt; a concession approved late is recorded for follow-up. Every
// change is announced on approvals.<tenant> for the workspace's live queue (GET /api/approvals/stream).
import { Effect } from "effect"
import { fillCallbackAt } from "../analysis/analysis.repo.js"
import type { Principal } from "../auth/principal.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Conflict, NotFound } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { observeApprovalDecision } from "../platform/metrics.js"
import { type ApprovalDecided, RT_APPROVAL_DECIDED } from "../platform/subjects.js"
import { iso } from "../platform/time.js"
import { scheduleCallback } from "../runs/runs.repo.js"
import type { StreamSink } from "../turns/turn-hub.js"
import { approvalObject } from "../webhooks/event-data.js"
import { ApprovalStreams } from "./ApprovalStreams.js"
import { announceApprovalChange } from "./approval-changes.js"
import * as repo from "./approvals.repo.js"

/** How far ahead an approved callback is dialed again (scaled by SIM_TIME_SCALE in simulation). */
export const CALLBACK_DELAY_MS = 2 * 3_600_000

/** The approval object of GET /api/approvals, built as the approval.* events build theirs. */
export const approvalView = (r: repo.ApprovalRow) => approvalObject(r)

export const listApprovals = (tenantId: number, f: repo.ListFilter) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => repo.listApprovals(sql, tenantId, f))
    return rows.map(approvalView)
  })

export const decideApproval = (
  caller: Principal,
  approvalId: number,
  decision: "approve" | "deny",
  note: string | null,
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const bus = yield* Bus
    const log = yield* Log
    const config = yield* AppConfig
    const status = decision === "approve" ? "approved" : "denied"
    const outcome = yield* Effect.promise(() =>
      repo.decide(sql, {
        tenantId: caller.tenantId,
        approvalId,
        status,
        userId: caller.kind === "user" ? caller.userId : null,
        apiKeyId: caller.kind === "api_key" ? caller.keyId : null,
        note,
      }),
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
      decided_by: row.decided_by,
    }
    yield* Effect.try(() => bus.publish(RT_APPROVAL_DECIDED, message)).pipe(
      Effect.catchAll((err) =>
        Effect.sync(() => log.warn({ err, approval_id: row.id }, "could not announce an approval decision")),
      ),
    )
    // The supervisors' queues: the decision leaves every other screen at once.
    announceApprovalChange(bus, log, caller.tenantId, { approvalId: row.id, status, at: row.decided_at ?? new Date() })
    if (
      outcome.callEnded &&
      status === "approved" &&
      row.proposed_action === "callback" &&
      row.run_id !== null &&
      outcome.runTargetId !== null
    ) {
      const at = new Date(Date.now() + CALLBACK_DELAY_MS * config.simTimeScale)
      const scheduled = yield* Effect.promise(() => scheduleCallback(sql, row.run_id!, outcome.runTargetId!, at))
      // The call's analysis may already be stored: its callback_at is this callback.
      if (scheduled && row.call_id !== null) yield* Effect.promise(() => fillCallbackAt(sql, row.call_id!, at))
    }
    return { id: row.id, status, decided_at: iso(row.decided_at), decided_by: row.decided_by, note: row.note }
  })

/**
 * The function that serves one watcher of the workspace's approval changes: join the workspace's
 * subscription, tell EventSource how soon to reconnect, then pass each change on until the client
 * leaves (or is dropped, or its credential is revoked: the server ends the stream).
 */
export const openApprovalStream = (tenantId: number) =>
  Effect.gen(function* () {
    const h = yield* ApprovalStreams
    return async (sink: StreamSink & { onClose(cb: () => void): void }): Promise<void> => {
      const watcher = await h.join(tenantId, sink)
      const closed = new Promise<void>((resolve) => sink.onClose(resolve))
      void closed.then(() => h.leave(watcher))
      if (!(await sink.write("retry: 2000\n\n"))) return
      await closed
    }
  })
