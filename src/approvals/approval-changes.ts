// Telling the api processes that a workspace's approvals changed (created, decided, expired, or
// cancelled by an erase), always after the commit that made it true, so a listener that reads back finds it.
import type { Logger } from "pino"
import type { BusClient } from "../platform/bus/bus.js"
import type { Sql } from "../platform/Db.js"
import { type ApprovalChanged, approvalsSubject } from "../platform/subjects.js"
import { expireApprovals } from "./approvals.repo.js"

/**
 * Publishes one change on `approvals.<tenant>`. A bus that is away loses it, and that is all: the
 * row is already in Postgres, and a console's slow poll (or its reconnect) reads it from there.
 */
export function announceApprovalChange(
  bus: BusClient,
  log: Logger,
  tenantId: number,
  change: { readonly approvalId: number; readonly status: ApprovalChanged["status"]; readonly at: Date },
): void {
  const message: ApprovalChanged = {
    approval_id: change.approvalId,
    status: change.status,
    at: change.at.toISOString(),
  }
  try {
    bus.publish(approvalsSubject(tenantId), message)
  } catch (err) {
    log.warn({ err, approval_id: change.approvalId }, "could not announce an approval change")
  }
}

/**
 * Expires approvals past their expiry (one, when its actor's timer fires, or every due one, the
 * runtime's sweep) and announces each after the commit; the number expired.
 */
export async function expireAndAnnounce(
  deps: { readonly sql: Sql; readonly bus: BusClient; readonly log: Logger },
  which: number | "due",
): Promise<number> {
  const rows = await expireApprovals(deps.sql, which)
  for (const r of rows)
    announceApprovalChange(deps.bus, deps.log, r.tenant_id, { approvalId: r.id, status: "expired", at: r.expires_at })
  return rows.length
}
