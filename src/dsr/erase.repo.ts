// A data-subject erase, in one transaction of one workspace: each table's own repository does its
// part (contact-tables.ts lists the same tables for export); this file runs the parts in order.
// Deletes the contact's own rows (targets, turns, feedback, call analyses, outbound webhook events
// with their deliveries, email events/preferences/suppressions, data-source rows and chat messages
// naming them, recent-contact cooldown) and rewrites the rows kept for audit (calls, run targets,
// dial decisions, approvals, DNC, inbound calls, email messages, usage events, run snapshots) so the
// phone or email is replaced by `erased:<hash>`. ledger_entries is never touched (append-only; its
// entries carry no phone or email, see the report in docs/privacy.md).

import { deleteCallAnalyses } from "../analysis/analysis.repo.js"
import { emitResolvedApprovals, eraseContactApprovals } from "../approvals/approvals.repo.js"
import { contactTargets, deleteContactTargets } from "../audience/audience.repo.js"
import { pseudonymiseAudit } from "../audit/audit.repo.js"
import {
  contactCallIds,
  eraseCallPhones,
  forgetRecentContacts,
  liveCallsWith,
  scrubDialDecisions,
} from "../calls/calls.repo.js"
import { eraseInboundCaller } from "../calls/inbound-calls.repo.js"
import { eraseDncPhone } from "../compliance/dnc.repo.js"
import { eraseContactData } from "../data/sources.repo.js"
import { eraseContactEmail } from "../email/email.repo.js"
import { contactMatch, type EraseTarget } from "../erasure/contact-match.repo.js"
import { forgetAnswersNaming } from "../idempotency/idempotency.repo.js"
import { deleteFeedbackOnTurns } from "../kb/feedback.repo.js"
import { scrubKbEvents } from "../kb/kb.repo.js"
import type { Tx } from "../platform/Db.js"
import { deleteCallRecordings } from "../recordings/recordings.repo.js"
import { eraseContactTargets } from "../runs/run-targets.repo.js"
import { scrubRunSnapshots } from "../runs/runs.repo.js"
import { contactTurnIds, deleteTurns } from "../turns/turns.repo.js"
import { scrubUsageEvents } from "../usage-events/usage-events.repo.js"
import { eraseContactEvents } from "../webhooks/outbox.repo.js"

/** Calls of the contact that are not over yet (the runtime still holds them). */
export async function liveCalls(tx: Tx, t: EraseTarget): Promise<{ id: number; run_id: number }[]> {
  return t.kind === "phone" ? liveCallsWith(tx, t.tenantId, t.identifier) : []
}

/** What an erase did: rows affected per table, and the pending approvals it cancelled. */
export interface Erased {
  readonly counts: Record<string, number>
  readonly cancelledApprovals: ReadonlyArray<{ readonly id: number; readonly decided_at: Date }>
}

/** Erases the contact in the workspace (rows affected per table: zero when nothing was left). */
export async function eraseContact(tx: Tx, t: EraseTarget): Promise<Erased> {
  const n: Record<string, number> = {}
  const T = t.tenantId
  const m = contactMatch(tx, t)
  const count = (name: string, rows: number) => {
    n[name] = (n[name] ?? 0) + rows
  }

  const { ids: targetIds, phones } = await contactTargets(tx, m)
  const callIds = await contactCallIds(tx, T, targetIds, phones)
  const turnIds = await contactTurnIds(tx, T, callIds, targetIds)

  // Approvals: pending ones are cancelled; all are kept for audit without the contact.
  const approvals = await eraseContactApprovals(tx, m, phones, callIds)
  count("approvals_cancelled", approvals.cancelled.length)
  count("approvals", approvals.scrubbed)

  const feedback = await deleteFeedbackOnTurns(tx, T, turnIds)
  count("kb_rule_feedback", feedback.kb_rule_feedback)
  count("kb_feedback", feedback.kb_feedback)
  count("turns", await deleteTurns(tx, turnIds))
  count("call_analyses", await deleteCallAnalyses(tx, T, callIds))
  // The calls' recordings (rows and pg chunks now; S3 objects queued, deleted after the commit).
  count("recordings", await deleteCallRecordings(tx, T, callIds))
  const hooks = await eraseContactEvents(tx, m, callIds)
  count("webhook_events", hooks.events)
  count("webhook_deliveries_pending", hooks.pending)
  // The cancelled approvals are resolved for webhook receivers too (after the delete above, which
  // would take their events with it), as they now stand: without the contact.
  await emitResolvedApprovals(
    tx,
    T,
    approvals.cancelled.map((a) => a.id),
  )
  count("calls", await eraseCallPhones(tx, callIds, t.marker))
  count("run_targets", await eraseContactTargets(tx, T, t.marker, targetIds, phones))
  count("audience_targets", await deleteContactTargets(tx, T, targetIds, phones))
  count("recent_contacts", await forgetRecentContacts(tx, T, phones))

  // Kept for audit, with the marker instead of the phone/email.
  count("dial_decisions", await scrubDialDecisions(tx, m))
  if (t.kind === "phone") {
    count("dnc_entries", await eraseDncPhone(tx, T, t.identifier, t.marker))
    count("inbound_calls", await eraseInboundCaller(tx, T, t.identifier, t.marker))
  }
  count("usage_events", await scrubUsageEvents(tx, m))
  count("runs", await scrubRunSnapshots(tx, m))

  const email = await eraseContactEmail(tx, m)
  count("email_events", email.email_events)
  count("email_messages", email.email_messages)
  count("email_preferences", email.email_preferences)
  count("email_suppressions", email.email_suppressions)

  const data = await eraseContactData(tx, m)
  count("data_source_rows", data.data_source_rows)
  count("data_source_messages", data.data_source_messages)
  count("idempotency_keys", await forgetAnswersNaming(tx, m))
  count("kb_events", await scrubKbEvents(tx, m))
  count("audit_events", await pseudonymiseAudit(tx, m))
  return { counts: n, cancelledApprovals: approvals.cancelled }
}
