// SQL for approvals, the only writer of them: as the api decides them (atomically in Postgres: only
// a pending, unexpired approval of the workspace changes, and what it did to the call's result is
// written with it), as the runtime writes them (a proposal's row, its actor's snapshot, expiry, and
// the expiry sweep) and as a data-subject erase cancels and scrubs them. The queue's reads (the
// polling filters, a supervisor's order, the pending count) are in approval-queue.repo.ts.

import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import { approvalEvent } from "../webhooks/event-data.js"
import { emitEvents } from "../webhooks/outbox.repo.js"

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired"

export interface ApprovalRow {
  readonly id: number
  readonly workflow_id: number
  readonly run_id: number | null
  readonly call_id: number | null
  readonly target_phone: string | null
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly currency: Currency
  readonly rationale: string | null
  readonly context: Record<string, unknown>
  /** A pending approval past its expiry reads as expired, whether or not the sweep has run. */
  readonly status: ApprovalStatus
  readonly created_at: Date
  readonly expires_at: Date
  readonly decided_at: Date | null
  readonly decided_by: number | null
  readonly decided_by_api_key_id: number | null
  readonly note: string | null
  /** A pending approval's phase: on_hold while its callee is held for it, else after_call; null once resolved. */
  readonly phase: ApprovalPhase | null
  /** An approved concession's amount (the proposal's unless the approver set another); else null. */
  readonly approved_value_minor: number | null
  readonly decided_phase: ApprovalPhase | null
  readonly late_outcome: string | null
  readonly effect: string | null
  readonly decided_by_kind: "user" | "api_key" | "system" | null
  readonly decided_by_name: string | null
  readonly decided_by_email: string | null
  readonly target_name: string | null
  readonly workflow_name: string | null
}

/**
 * on_hold: the call is live and its callee still holds for this decision (until context.hold_until);
 * after_call: the call has ended (or is ending, its hold over), and the decision counts until expires_at.
 */
export type ApprovalPhase = "on_hold" | "after_call"

/**
 * An approval's status as everyone reads it: a pending approval past its expiry is expired, whether
 * or not its actor's timer (or the sweep) has written that yet. `alias` names the approvals row;
 * `now` defaults to the statement's time.
 */
export const effectiveApprovalStatus = (sql: Sql | Tx, alias: string, now?: Date) => {
  const a = sql(alias)
  const at = now === undefined ? sql`now()` : sql`${now}`
  return sql`(case when ${a}.status = 'pending' and ${a}.expires_at <= ${at} then 'expired' else ${a}.status end)`
}

/**
 * A pending approval's phase (null once it is resolved): on_hold while its call is live and the
 * callee's hold (context.hold_until, written with the row) has not run out; an approval written
 * without hold_until holds as long as its call is live.
 */
export const approvalPhase = (sql: Sql | Tx, alias: string) => {
  const a = sql(alias)
  return sql`(case when ${effectiveApprovalStatus(sql, alias)} = 'pending' then
    case when exists (select 1 from calls pc where pc.id = ${a}.call_id and pc.status <> 'ended')
      and coalesce((${a}.context ->> 'hold_until')::timestamptz > now(), true)
    then 'on_hold' else 'after_call' end end)`
}

/** Every column of the approval object, for `approvals` rows (read, inserted or updated). */
export const approvalColumns = (sql: Sql | Tx) => sql`
  approvals.id, approvals.workflow_id, approvals.run_id, approvals.call_id, approvals.target_phone,
  approvals.proposed_action, approvals.proposed_value_minor, approvals.currency, approvals.rationale, approvals.context,
  ${effectiveApprovalStatus(sql, "approvals")} as status,
  approvals.created_at, approvals.expires_at, approvals.decided_at, approvals.decided_by,
  approvals.decided_by_api_key_id, approvals.note, ${approvalPhase(sql, "approvals")} as phase,
  approvals.approved_value_minor, approvals.decided_phase, approvals.late_outcome, approvals.effect,
  (case when approvals.decided_by is not null then 'user'
    when approvals.decided_by_api_key_id is not null then 'api_key'
    when approvals.status in ('approved', 'denied') then 'system' end) as decided_by_kind,
  coalesce(
    (select coalesce(nullif(u.full_name, ''), u.email) from users u where u.id = approvals.decided_by),
    (select k.name from api_keys k where k.id = approvals.decided_by_api_key_id)
  ) as decided_by_name,
  (select u.email from users u where u.id = approvals.decided_by) as decided_by_email,
  (select au.name from calls tc join audience_targets au on au.id = tc.target_id where tc.id = approvals.call_id)
    as target_name,
  (select w.name from workflows w where w.id = approvals.workflow_id) as workflow_name`

/** What deciding an approval checks before it tries: its action, and the cap of the rule book its run follows. */
export interface DecisionTarget {
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly currency: Currency
  /** The concession cap of the run's rule book (its workflow's current one for a run before pinning); null: none. */
  readonly cap_minor: number | null
}

export const decisionTarget = async (
  sql: Sql,
  tenantId: number,
  approvalId: number,
): Promise<DecisionTarget | undefined> => {
  const [row] = await sql<[DecisionTarget?]>`
    select a.proposed_action, a.proposed_value_minor, a.currency,
      (rb.body -> 'concession_policy' ->> 'cap_minor')::bigint as cap_minor
    from approvals a
    left join runs r on r.id = a.run_id
    left join workflows w on w.id = a.workflow_id
    left join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    where a.id = ${approvalId} and a.tenant_id = ${tenantId}`
  return row === undefined ? undefined : { ...row, cap_minor: row.cap_minor === null ? null : Number(row.cap_minor) }
}

export type DecideOutcome =
  | { readonly kind: "decided"; readonly row: ApprovalRow }
  | { readonly kind: "not_found" }
  | { readonly kind: "conflict"; readonly status: ApprovalStatus }

/** The call an approval came from, as its decision finds it (its row share-locked until the decision commits). */
export interface DecidedCall {
  readonly id: number
  readonly status: string
  readonly outcome: string | null
  readonly run_target_id: number
  /** The call has ended: its target's result is written. */
  readonly ended: boolean
  /** The call is live and its callee still holds for this decision. */
  readonly holding: boolean
}

/** What a decision did beyond itself: the phase it was made in, and what it wrote into the call's result. */
export interface DecisionEffect {
  readonly phase: ApprovalPhase
  readonly lateOutcome: string | null
  readonly effect: string | null
}

/** Works out (and, after the call, applies) what a decision does, inside the deciding transaction. */
export type DecisionEffects = (tx: Tx, row: ApprovalRow, call: DecidedCall | undefined) => Promise<DecisionEffect>

/** With no effects given: the phase alone, and nothing applied. */
const phaseOnly: DecisionEffects = async (_tx, _row, call) => ({
  phase: call?.holding ? "on_hold" : "after_call",
  lateOutcome: null,
  effect: null,
})

/**
 * Decides a pending approval: exactly one of any number of concurrent decisions wins. Its call's row
 * is share-locked before the call's state is read: a call ending at the same moment either commits
 * first (the decision sees it ended and applies itself to the result) or waits for this commit (and
 * the call's end then finds the decision: src/approvals/late-decisions.ts).
 */
export const decide = async (
  sql: Sql,
  d: {
    tenantId: number
    approvalId: number
    status: "approved" | "denied"
    userId: number | null
    apiKeyId: number | null
    note: string | null
    /** An approved concession's amount, when it differs from the proposal's (checked against the cap by the caller). */
    valueMinor?: number | null | undefined
  },
  effects: DecisionEffects = phaseOnly,
): Promise<DecideOutcome> =>
  (await sql.begin(async (tx) => {
    const [decided] = await tx<[{ id: number; call_id: number | null }?]>`
      update approvals
      set status = ${d.status}, decided_at = now(), decided_by = ${d.userId}, decided_by_api_key_id = ${d.apiKeyId},
        note = ${d.note},
        approved_value_minor = case when ${d.status} = 'approved' and proposed_action = 'concession'
          then coalesce(${d.valueMinor ?? null}::bigint, proposed_value_minor) end
      where id = ${d.approvalId} and tenant_id = ${d.tenantId} and status = 'pending' and expires_at > now()
      returning id, call_id`
    if (!decided) {
      const [existing] = await tx<[{ status: ApprovalStatus }?]>`
        select ${effectiveApprovalStatus(tx, "approvals")} as status
        from approvals where id = ${d.approvalId} and tenant_id = ${d.tenantId}`
      return existing === undefined ? { kind: "not_found" } : { kind: "conflict", status: existing.status }
    }
    const [call] = await tx<[DecidedCall?]>`
      select c.id, c.status, c.outcome, c.run_target_id, c.status = 'ended' as ended,
        (c.status <> 'ended' and coalesce((a.context ->> 'hold_until')::timestamptz > now(), true)) as holding
      from calls c join approvals a on a.id = ${decided.id}
      where c.id = ${decided.call_id}
      for share of c`
    const [row] = await tx<[ApprovalRow]>`select ${approvalColumns(tx)} from approvals where id = ${decided.id}`
    const e = await effects(tx, row, call)
    const [final] = await tx<[ApprovalRow]>`
      update approvals set decided_phase = ${e.phase}, late_outcome = ${e.lateOutcome}, effect = ${e.effect}
      where id = ${decided.id}
      returning ${approvalColumns(tx)}`
    if (!(await isRehearsal(tx, final.workflow_id))) await emitEvents(tx, [approvalEvent(d.tenantId, final)])
    return { kind: "decided", row: final }
  })) as DecideOutcome

/**
 * Decided approvals of `callId` among `ids` (the ones its call stopped holding for) whose effect on
 * the result is not applied yet, locked for the caller's transaction (late-decisions.ts applies them).
 */
export const unappliedDecisions = (tx: Tx, callId: number, ids: readonly number[]) =>
  tx<ApprovalRow[]>`
    select ${approvalColumns(tx)} from approvals
    where call_id = ${callId} and id = any(${tx.array([...ids])}::bigint[]) and status in ('approved', 'denied')
      and late_outcome is null
    order by decided_at, id
    for update of approvals`

/** Records what a decision did once the call's end applied it (`lateOutcome` is never null once applied). */
export const setDecisionEffect = (tx: Tx, approvalId: number, lateOutcome: string, effect: string) =>
  tx`update approvals set late_outcome = ${lateOutcome}, effect = ${effect} where id = ${approvalId}`

export interface NewApproval {
  readonly tenantId: number
  readonly workflowId: number
  readonly runId: number
  readonly callId: number
  readonly phone: string
  readonly action: "concession" | "callback" | "escalate"
  readonly valueMinor: number | null
  readonly currency: Currency
  readonly rationale: string
  readonly context: Record<string, unknown>
  readonly ttlMs: number
}

/** The proposal's row and its approval.requested event, together. */
export const insertApproval = async (
  sql: Sql,
  a: NewApproval,
): Promise<{ id: number; expires_at: Date; created_at: Date }> =>
  (await sql.begin(async (tx) => {
    const [row] = await tx<[ApprovalRow]>`
      insert into approvals (tenant_id, workflow_id, run_id, call_id, target_phone, proposed_action,
        proposed_value_minor, currency, rationale, context, expires_at)
      values (${a.tenantId}, ${a.workflowId}, ${a.runId}, ${a.callId}, ${a.phone}, ${a.action}, ${a.valueMinor},
        ${a.currency}, ${a.rationale},
              ${tx.json(a.context as never)}, now() + ${a.ttlMs} * interval '1 millisecond')
      returning ${approvalColumns(tx)}`
    if (!(await isRehearsal(tx, a.workflowId))) await emitEvents(tx, [approvalEvent(a.tenantId, row)])
    return { id: row.id, expires_at: row.expires_at, created_at: row.created_at }
  })) as { id: number; expires_at: Date; created_at: Date }

/**
 * A simulation campaign's workflow (src/rehearsals/): its approvals are a rehearsal's, hidden like its
 * runs and calls, and send no webhook event.
 */
const isRehearsal = async (tx: Tx, workflowId: number): Promise<boolean> =>
  (await tx`select 1 from workflows where id = ${workflowId} and kind = 'rehearsal'`).length > 0

/**
 * approval.resolved for approvals another domain settled in its own transaction (a data-subject
 * erase denies the contact's pending ones): read back as they now stand, rehearsals left out.
 */
export async function emitResolvedApprovals(tx: Tx, tenantId: number, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return
  const rows = await tx<ApprovalRow[]>`
    select ${approvalColumns(tx)} from approvals
    where tenant_id = ${tenantId} and id = any(${tx.array([...ids])}::bigint[]) and status <> 'pending'
      and not exists (select 1 from workflows w where w.id = approvals.workflow_id and w.kind = 'rehearsal')
    order by id`
  await emitEvents(
    tx,
    rows.map((r) => approvalEvent(tenantId, r)),
  )
}

export const saveApprovalSnapshot = (sql: Sql, approvalId: number, snapshot: unknown, version: number) =>
  sql`update approvals set snapshot = ${sql.json(snapshot as never)}, machine_version = ${version}
    where id = ${approvalId}`

/** An approval the expiry wrote, as its announcement needs it. */
export interface ExpiredApproval {
  readonly id: number
  readonly tenant_id: number
  readonly expires_at: Date
}

/**
 * Expires approvals in Postgres: only a still-pending one past its expiry expires, so whichever of
 * its actor's timer and the sweep comes first writes it, and its approval.resolved, once. `which`:
 * one approval (its actor's timer) or every due one (the sweep, for approvals whose actor is gone).
 */
export const expireApprovals = (sql: Sql, which: number | "due"): Promise<ExpiredApproval[]> =>
  sql.begin(async (tx) => {
    const rows = await tx<(ApprovalRow & { tenant_id: number; rehearsal: boolean })[]>`
      update approvals set status = 'expired' where status = 'pending' and expires_at <= now()
        and ${which === "due" ? tx`true` : tx`id = ${which}`}
      returning tenant_id, ${approvalColumns(tx)},
        exists (select 1 from workflows w where w.id = approvals.workflow_id and w.kind = 'rehearsal') as rehearsal`
    await emitEvents(
      tx,
      rows.filter((r) => !r.rehearsal).map((r) => approvalEvent(Number(r.tenant_id), r)),
    )
    return rows.map((r) => ({ id: Number(r.id), tenant_id: Number(r.tenant_id), expires_at: r.expires_at }))
  }) as Promise<ExpiredApproval[]>

export const expireApproval = async (sql: Sql, approvalId: number): Promise<number> =>
  (await expireApprovals(sql, approvalId)).length

/** Every runtime process sweeps approvals whose actor is gone (their run ended or moved). */
export const expireDueApprovals = async (sql: Sql): Promise<number> => (await expireApprovals(sql, "due")).length

export interface PendingApprovalRow {
  readonly id: number
  readonly tenant_id: number
  readonly run_id: number | null
  readonly call_id: number | null
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly expires_at: Date
  readonly snapshot: unknown
  readonly machine_version: number | null
}

export const pendingApprovalsOfRun = (sql: Sql, runId: number) =>
  sql<PendingApprovalRow[]>`
    select id, tenant_id, run_id, call_id, proposed_action, proposed_value_minor, expires_at, snapshot, machine_version
    from approvals where run_id = ${runId} and status = 'pending'`

/**
 * A data-subject erase (src/dsr/): the contact's pending approvals are cancelled, and every approval of
 * theirs is kept for audit without them (the marker for the phone, the contact scrubbed from the rest).
 */
export async function eraseContactApprovals(
  tx: Tx,
  m: ContactMatch,
  phones: readonly string[],
  callIds: readonly number[],
): Promise<{ cancelled: { id: number; decided_at: Date }[]; scrubbed: number }> {
  const theirs = () => tx`target_phone = any(${tx.array([...phones])}::text[])
    or call_id = any(${tx.array([...callIds])}::bigint[])`
  const cancelled = (
    await tx<{ id: number; decided_at: Date }[]>`
    update approvals set status = 'denied', decided_at = now(), note = 'cancelled: data-subject erase'
    where tenant_id = ${m.tenantId} and status = 'pending' and (${theirs()} or ${m.mentions("context")})
    returning id, decided_at`
  ).map((r) => ({ id: Number(r.id), decided_at: r.decided_at }))
  const scrubbed = await tx`
    update approvals set
      target_phone = case when target_phone is null then null else ${m.marker} end,
      context = ${m.scrub("context")}::jsonb, rationale = ${m.scrub("rationale")}, note = ${m.scrub("note")},
      snapshot = ${m.scrub("snapshot")}::jsonb
    where tenant_id = ${m.tenantId} and (${theirs()} or ${m.mentions("context")} or ${m.mentions("snapshot")})`
  return { cancelled, scrubbed: scrubbed.count }
}
