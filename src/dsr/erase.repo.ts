// SQL of a data-subject erase, in one transaction of one workspace (DSR ERASE REPO: the deletes
// and scrubs of other domains' tables live here, not at the end of each domain's repo, to keep the
// erase in one reviewable place; src/dsr/contact-tables.ts lists the same tables for export).
// Deletes the contact's own rows (targets, turns, feedback, call analyses, outbound webhook events
// with their deliveries, email events/preferences/suppressions, data-source rows and chat messages
// naming them, recent-contact cooldown) and rewrites the rows kept for audit (calls, run targets,
// dial decisions, approvals, DNC, inbound calls, email messages, usage events, run snapshots) so the
// phone or email is replaced by `erased:<hash>`. ledger_entries is never touched (append-only; its
// entries carry no phone or email, see the report in docs/privacy.md).

import { emitResolvedApprovals } from "../approvals/approvals.repo.js"
import type { Tx } from "../platform/Db.js"
import { eraseContactTargets } from "../runs/run-targets.repo.js"

export interface EraseTarget {
  readonly tenantId: number
  readonly kind: "phone" | "email"
  /** E.164 phone or lower-cased email. */
  readonly identifier: string
  /** Lower-case strings a stored copy reduces to (phone: digit forms, see identifier.ts; email: itself). */
  readonly forms: readonly string[]
  /** `erased:<hash>`: what kept rows hold instead. */
  readonly marker: string
}

const reEscape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Calls of the contact that are not over yet (the runtime still holds them). */
export async function liveCalls(tx: Tx, t: EraseTarget): Promise<{ id: number; run_id: number }[]> {
  if (t.kind !== "phone") return []
  return [
    ...(await tx<{ id: number; run_id: number }[]>`
    select id, run_id from calls
    where tenant_id = ${t.tenantId} and phone_e164 = ${t.identifier} and status <> 'ended'`),
  ]
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
  const id = t.identifier
  const forms = t.forms.length > 0 ? t.forms : [id]
  const alternatives = forms.map(reEscape).join("|")
  const pattern = t.kind === "phone" ? `(?<![0-9])\\+?(${alternatives})(?![0-9])` : `(${alternatives})`
  // a text/jsonb value mentions the contact (phone in any stored form, email in any case)
  const mentions = (col: string) =>
    tx`lower(${tx.unsafe(col)}::text) ~ ${t.kind === "phone" ? `(?<![0-9])(${alternatives})(?![0-9])` : alternatives}`
  const scrub = (col: string) => tx`regexp_replace(${tx.unsafe(col)}::text, ${pattern}, ${t.marker}, 'gi')`
  // a JSONB object holds the phone as a value in any format (spaces, dashes, national): its digits
  const holds = (col: string) =>
    t.kind === "email"
      ? mentions(col)
      : tx`(${mentions(col)} or exists (
          select 1 from jsonb_each_text(case when jsonb_typeof(${tx.unsafe(col)}) = 'object'
            then ${tx.unsafe(col)} else '{}' end) f
          where regexp_replace(f.value, '[^0-9]', '', 'g') = any(${tx.array([...forms])}::text[])))`
  const count = (name: string, rows: { count: number }) => {
    n[name] = (n[name] ?? 0) + rows.count
  }

  // The contact's audience targets: by number, or (email) by a field holding the address.
  const targetIds = (
    await tx<{ id: number }[]>`
    select id from audience_targets where tenant_id = ${T}
      and ${t.kind === "phone" ? tx`phone_e164 = ${id}` : mentions("fields")}`
  ).map((r) => r.id)
  const phones =
    t.kind === "phone"
      ? [id]
      : (
          await tx<{ phone_e164: string }[]>`
          select distinct phone_e164 from audience_targets where id = any(${tx.array(targetIds)}::bigint[])`
        ).map((r) => r.phone_e164)

  const callIds = (
    await tx<{ id: number }[]>`
    select id from calls where tenant_id = ${T}
      and (target_id = any(${tx.array(targetIds)}::bigint[]) or phone_e164 = any(${tx.array(phones)}::text[]))`
  ).map((r) => r.id)
  const turnIds = (
    await tx<{ id: number }[]>`
    select id from turns where tenant_id = ${T}
      and (call_id = any(${tx.array(callIds)}::bigint[]) or target_id = any(${tx.array(targetIds)}::bigint[]))`
  ).map((r) => r.id)

  // Approvals: pending ones are cancelled; all are kept for audit without the contact.
  const cancelled = (
    await tx<{ id: number; decided_at: Date }[]>`
    update approvals set status = 'denied', decided_at = now(), note = 'cancelled: data-subject erase'
    where tenant_id = ${T} and status = 'pending'
      and (target_phone = any(${tx.array(phones)}::text[]) or call_id = any(${tx.array(callIds)}::bigint[])
        or ${mentions("context")})
    returning id, decided_at`
  ).map((r) => ({ id: Number(r.id), decided_at: r.decided_at }))
  count("approvals_cancelled", { count: cancelled.length })
  count(
    "approvals",
    await tx`
    update approvals set
      target_phone = case when target_phone is null then null else ${t.marker} end,
      context = ${scrub("context")}::jsonb, rationale = ${scrub("rationale")}, note = ${scrub("note")},
      snapshot = ${scrub("snapshot")}::jsonb
    where tenant_id = ${T}
      and (target_phone = any(${tx.array(phones)}::text[]) or call_id = any(${tx.array(callIds)}::bigint[])
        or ${mentions("context")} or ${mentions("snapshot")})`,
  )

  count(
    "kb_rule_feedback",
    await tx`
    delete from kb_rule_feedback where feedback_id in
      (select id from kb_feedback where tenant_id = ${T} and turn_id = any(${tx.array(turnIds)}::bigint[]))`,
  )
  count(
    "kb_feedback",
    await tx`delete from kb_feedback where tenant_id = ${T} and turn_id = any(${tx.array(turnIds)}::bigint[])`,
  )
  count("turns", await tx`delete from turns where id = any(${tx.array(turnIds)}::bigint[])`)
  // The analyses of the contact's calls are what they said, summarised and extracted: they go with the
  // transcript (the worker then claims nothing of theirs: an attempt in flight stores nothing, as its
  // conditional update finds no row, and the sweep does not enqueue a call whose phone is erased).
  count(
    "call_analyses",
    await tx`delete from call_analyses where tenant_id = ${T} and call_id = any(${tx.array(callIds)}::bigint[])`,
  )
  // Outbound events of the contact's calls (call.*, approval.* and call.analyzed carry data.call_id)
  // or quoting the identifier (message.* carry the address) go, their deliveries and attempts with them
  // (on delete cascade): a delivery still queued must not send the contact after the erase. One
  // statement, so the pending deliveries counted are the ones the cascade removes.
  const [hooks] = await tx<[{ events: number; pending: number }]>`
    with gone as (
      delete from webhook_events where tenant_id = ${T}
        and ((body -> 'data' ->> 'call_id') = any(${tx.array(callIds.map(String))}::text[]) or ${mentions("body")})
      returning id)
    select (select count(*)::int from gone) as events,
      (select count(*)::int from webhook_deliveries
        where event_id in (select id from gone) and status = 'pending') as pending`
  count("webhook_events", { count: hooks.events })
  count("webhook_deliveries_pending", { count: hooks.pending })
  // The cancelled approvals are resolved for webhook receivers too (after the delete above, which
  // would take their events with it), as they now stand: without the contact.
  await emitResolvedApprovals(
    tx,
    T,
    cancelled.map((a) => a.id),
  )
  // Calls and run targets stay (usage and ledger entries reference calls as `call:<id>`), hashed;
  // a run target not dialled yet is skipped for good.
  count("calls", await tx`update calls set phone_e164 = ${t.marker} where id = any(${tx.array(callIds)}::bigint[])`)
  count("run_targets", { count: await eraseContactTargets(tx, T, t.marker, targetIds, phones) })
  count("audience_targets", await tx`delete from audience_targets where id = any(${tx.array(targetIds)}::bigint[])`)
  await tx`
    delete from audience_staging where phone_e164 = any(${tx.array(phones)}::text[])
      and upload_id in (select id from audience_uploads where tenant_id = ${T})`
  count(
    "recent_contacts",
    await tx`delete from recent_contacts where tenant_id = ${T} and phone_e164 = any(${tx.array(phones)}::text[])`,
  )

  // Kept for audit, with the marker instead of the phone/email.
  count(
    "dial_decisions",
    await tx`
    update dial_decisions set detail = ${scrub("detail")}::jsonb, reason = ${scrub("reason")}
    where tenant_id = ${T} and (${mentions("detail")} or ${mentions("reason")})`,
  )
  if (t.kind === "phone") {
    count(
      "dnc_entries",
      await tx`update dnc_entries set phone_e164 = ${t.marker} where tenant_id = ${T} and phone_e164 = ${id}`,
    )
    count(
      "inbound_calls",
      await tx`update inbound_calls set from_e164 = ${t.marker} where tenant_id = ${T} and from_e164 = ${id}`,
    )
  }
  count(
    "usage_events",
    await tx`
    update usage_events set attributes = ${scrub("attributes")}::jsonb
    where tenant_id = ${T} and ${mentions("attributes")}`,
  )
  count(
    "runs",
    await tx`update runs set snapshot = ${scrub("snapshot")}::jsonb where tenant_id = ${T} and ${mentions("snapshot")}`,
  )

  // Email.
  count("email_events", await tx`delete from email_events where tenant_id = ${T} and lower(to_email) = ${id}`)
  count(
    "email_messages",
    await tx`
    update email_messages set to_email = ${t.marker}, subject = ${scrub("subject")}, error = ${scrub("error")}
    where tenant_id = ${T} and lower(to_email) = ${id}`,
  )
  count("email_preferences", await tx`delete from email_preferences where tenant_id = ${T} and lower(email) = ${id}`)
  count("email_suppressions", await tx`delete from email_suppressions where tenant_id = ${T} and lower(email) = ${id}`)
  if (t.kind === "email") {
    await tx`delete from email_soft_bounces where email = ${id}`
    await tx`delete from email_webhook_events where lower(email) = ${id} or ${mentions("payload")}`
  }

  // Data sources: rows naming the contact go; the chat about them keeps the marker.
  count(
    "data_source_rows",
    await tx`
    delete from data_source_rows where source_id in (select id from data_sources where tenant_id = ${T})
      and ${holds("data")}`,
  )
  count(
    "data_source_messages",
    await tx`delete from data_source_messages where tenant_id = ${T} and (${mentions("text")} or ${mentions("data")})`,
  )
  // A kept Idempotency-Key answer (24 h) may repeat the contact: it goes (a retry then runs anew).
  count(
    "idempotency_keys",
    await tx`delete from idempotency_keys where tenant_id = ${T} and ${mentions("encode(body, 'escape')")}`,
  )
  count(
    "kb_events",
    await tx`update kb_events set detail = ${scrub("detail")}::jsonb where tenant_id = ${T} and ${mentions("detail")}`,
  )
  // The audit log is append-only; an erase is the one change it takes (its trigger lets this
  // transaction through): the contact's phone or email becomes the marker wherever it appears.
  await tx`select set_config('parley.audit_pseudonymise', 'on', true)`
  count(
    "audit_events",
    await tx`
    update audit_events set actor_email = ${scrub("actor_email")}, target = ${scrub("target")},
      before = ${scrub("before")}::jsonb, after = ${scrub("after")}::jsonb
    where tenant_id = ${T} and (${mentions("actor_email")} or ${mentions("target")} or ${mentions("before")}
      or ${mentions("after")})`,
  )
  await tx`select set_config('parley.audit_pseudonymise', 'off', true)`
  return { counts: n, cancelledApprovals: cancelled }
}
