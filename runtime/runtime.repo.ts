// SQL the runtime role runs: run leases (claim, renew, release), the dialer's due targets, the
// attempt that marks a target dialing before the carrier is asked, the end of an attempt, orphaned
// calls after a takeover, turns, the decision log and approvals. A run's writes are conditional on
// this process still owning the run, so a process that lost its lease changes nothing.
import type { Sql, Tx } from "../src/platform/Db.js"
import type { DialDecision } from "./dialer.policy.js"

export interface ClaimedRun {
  readonly id: number
  readonly tenant_id: number
  readonly workflow_id: number
  readonly status: "running" | "paused"
  readonly pause_reason: string | null
  /** The process that owned the run before this claim (null: nobody had it). */
  readonly previous_owner: string | null
  readonly snapshot: unknown
  readonly machine_version: number | null
}

/**
 * Claims one run that needs an owner: running with no owner or a lapsed lease, or paused with a
 * lapsed lease (its last owner died while calls were in flight). SKIP LOCKED lets several runtime
 * processes claim side by side.
 */
export const claimRun = async (sql: Sql, me: string, leaseMs: number, onlyRunId?: number): Promise<ClaimedRun | undefined> => {
  const [row] = await sql<[ClaimedRun?]>`
    with candidate as (
      select id, owner_instance from runs
      where ${onlyRunId === undefined ? sql`true` : sql`id = ${onlyRunId}`}
        and ((status = 'running' and (owner_instance is null or lease_expires_at < now()))
          or (status = 'paused' and owner_instance is not null and lease_expires_at < now()))
      order by id
      limit 1
      for update skip locked
    )
    update runs r
    set owner_instance = ${me}, lease_expires_at = now() + ${leaseMs} * interval '1 millisecond', updated_at = now()
    from candidate c
    where r.id = c.id
    returning r.id, r.tenant_id, r.workflow_id, r.status, r.pause_reason, c.owner_instance as previous_owner, r.snapshot, r.machine_version`
  return row
}

/** Extends this process's leases; returns the runs it still owns (the others were lost). */
export const renewLeases = async (sql: Sql, me: string, runIds: number[], leaseMs: number): Promise<Set<number>> => {
  if (runIds.length === 0) return new Set()
  const rows = await sql<{ id: number }[]>`
    update runs set lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
    where owner_instance = ${me} and id = any(${runIds}::bigint[])
    returning id`
  await sql`update dial_slots set expires_at = now() + ${leaseMs} * interval '1 millisecond' where owner_instance = ${me}`
  return new Set(rows.map((r) => r.id))
}

export const releaseRun = async (sql: Sql, me: string, runId: number): Promise<void> => {
  await sql`update runs set owner_instance = null, lease_expires_at = null where id = ${runId} and owner_instance = ${me}`
}

export interface RunSetup {
  readonly rule_book: unknown
  readonly schedule: Record<string, unknown>
  readonly schedule_kind: "immediate" | "window" | "once"
  readonly currency: "INR" | "USD"
  readonly tenant_name: string
  readonly workflow_name: string
}

export const loadRunSetup = async (sql: Sql, runId: number): Promise<RunSetup | undefined> => {
  const [row] = await sql<[RunSetup?]>`
    select rb.body as rule_book, w.schedule, w.schedule_kind, t.currency, t.name as tenant_name, w.name as workflow_name
    from runs r
    join workflows w on w.id = r.workflow_id
    join tenants t on t.id = r.tenant_id
    join rule_books rb on rb.id = coalesce(r.rule_book_id, w.rule_book_id)
    where r.id = ${runId}`
  return row
}

export const runStatusOf = async (sql: Sql, runId: number, me: string): Promise<{ status: string; owned: boolean } | undefined> => {
  const [row] = await sql<[{ status: string; owned: boolean }?]>`select status, owner_instance = ${me} as owned from runs where id = ${runId}`
  return row
}

export interface DueTarget {
  readonly id: number
  readonly target_id: number
  readonly phone_e164: string
  readonly attempts: number
  readonly name: string | null
  readonly on_dnc: boolean
  readonly ncpr_preference: string | null
  readonly last_contacted_at: Date | null
}

/** Targets whose turn has come, oldest due first, with what the compliance checks need. */
export const dueTargets = (sql: Sql, runId: number, limit: number) =>
  sql<DueTarget[]>`
    select t.id, t.target_id, t.phone_e164, t.attempts, a.name,
           exists (select 1 from dnc_entries d where d.tenant_id = t.tenant_id and d.phone_e164 = t.phone_e164) as on_dnc,
           (select n.preference from ncpr_registry n where n.phone_e164 = t.phone_e164) as ncpr_preference,
           (select c.last_contacted_at from recent_contacts c where c.tenant_id = t.tenant_id and c.phone_e164 = t.phone_e164) as last_contacted_at
    from run_targets t join audience_targets a on a.id = t.target_id
    where t.run_id = ${runId} and t.status in ('queued', 'waiting') and t.next_attempt_at <= now()
    order by t.next_attempt_at, t.id
    limit ${limit}`

/** How many targets still need the dialer, and when the earliest of them is due. */
export const pendingTargets = async (sql: Sql, runId: number): Promise<{ pending: number; next_at: Date | null }> => {
  const [row] = await sql<[{ pending: number; next_at: Date | null }]>`
    select count(*)::int as pending, min(next_attempt_at) as next_at
    from run_targets where run_id = ${runId} and status in ('queued', 'waiting')`
  return row
}

const insertDecision = (tx: Tx | Sql, tenantId: number, runId: number, callId: number | null, d: DialDecision) => tx`
  insert into dial_decisions (tenant_id, run_id, target_id, call_id, decision, reason, detail, cost_minor, at)
  values (${tenantId}, ${runId}, ${Number(d.targetId)}, ${callId}, ${d.decision}, ${d.reason}, ${tx.json(d.detail as never)}, ${d.costMinor}, ${new Date(d.at)})`

export type AttemptRefusal = "not_owner" | "not_due" | "tenant_cap"

/**
 * Marks the target dialing and writes the call row, the tenant slot, the decision and the
 * cool-down record in one transaction, before the carrier is asked: a process that takes the run
 * over sees the attempt and never dials it again. Refused when this process no longer owns the
 * running run, the target is no longer due, or the tenant's concurrent-call cap is reached.
 */
export const beginAttempt = async (
  sql: Sql,
  a: { me: string; runId: number; tenantId: number; workflowId: number; runTargetId: number; provider: string; tenantCap: number; slotLeaseMs: number; decision: DialDecision },
): Promise<{ callId: number; attempt: number; targetId: number; phone: string } | AttemptRefusal> => {
  try {
    return (await sql.begin(async (tx) => {
      const [run] = await tx<[{ ok: boolean }?]>`
        select true as ok from runs where id = ${a.runId} and owner_instance = ${a.me} and status = 'running' for share`
      if (!run) return "not_owner"
      const [target] = await tx<[{ attempts: number; target_id: number; phone_e164: string }?]>`
        update run_targets set status = 'dialing', attempts = attempts + 1, updated_at = now()
        where id = ${a.runTargetId} and run_id = ${a.runId} and status in ('queued', 'waiting')
        returning attempts, target_id, phone_e164`
      if (!target) return "not_due"
      const [call] = await tx<[{ id: number }]>`
        insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider, owner_instance)
        values (${a.tenantId}, ${a.runId}, ${a.workflowId}, ${a.runTargetId}, ${target.target_id}, ${target.attempts}, ${target.phone_e164}, ${a.provider}, ${a.me})
        returning id`
      await tx`update run_targets set last_call_id = ${call.id} where id = ${a.runTargetId}`
      await tx`
        insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values (${a.tenantId}, ${target.phone_e164}, now())
        on conflict (tenant_id, phone_e164) do update set last_contacted_at = excluded.last_contacted_at`
      await insertDecision(tx, a.tenantId, a.runId, call.id, { ...a.decision, detail: { ...a.decision.detail, attempt: target.attempts } })
      // The tenant's concurrency last: its lock serialises every attempt of the tenant across
      // processes, so it is held for as few statements as possible (count, slot, commit).
      await tx`select pg_advisory_xact_lock(hashtextextended('dial_slots:' || ${a.tenantId}::text, 0))`
      const [{ in_use }] = await tx<[{ in_use: number }]>`
        select count(*)::int as in_use from dial_slots where tenant_id = ${a.tenantId} and expires_at > now()`
      if (in_use >= a.tenantCap) throw new TenantCapReached()
      await tx`
        insert into dial_slots (call_id, tenant_id, workflow_id, owner_instance, expires_at)
        values (${call.id}, ${a.tenantId}, ${a.workflowId}, ${a.me}, now() + ${a.slotLeaseMs} * interval '1 millisecond')`
      return { callId: call.id, attempt: target.attempts, targetId: target.target_id, phone: target.phone_e164 }
    })) as { callId: number; attempt: number; targetId: number; phone: string } | AttemptRefusal
  } catch (e) {
    // Thrown to roll the whole attempt back.
    if (e instanceof TenantCapReached) return "tenant_cap"
    throw e
  }
}

class TenantCapReached extends Error {}

export const markAnswered = (sql: Sql, callId: number, at: Date) =>
  sql`update calls set status = 'connected', answered_at = ${at} where id = ${callId} and status = 'dialing'`

export const setProviderCallId = (sql: Sql, callId: number, providerCallId: string) =>
  sql`update calls set provider_call_id = ${providerCallId} where id = ${callId}`

/** What happens to the target once an attempt has ended. */
export type TargetNext =
  | { readonly kind: "done"; readonly outcome: string }
  | { readonly kind: "retry"; readonly at: number; readonly outcome: string }
  /** Never reached the carrier (no funds): the target goes back to the queue. */
  | { readonly kind: "requeue"; readonly outcome: string }

/** Ends an attempt: the call row, the target's next step, the slot and the decision, together. */
export const finishAttempt = async (
  sql: Sql,
  f: {
    me: string
    runId: number
    tenantId: number
    callId: number
    runTargetId: number
    outcome: string
    connectedSeconds: number
    costMinor: number | null
    reservedMinor: number | null
    endedAt: Date
    next: TargetNext
    decision: DialDecision
    addToDnc: boolean
    phone: string
  },
): Promise<boolean> =>
  (await sql.begin(async (tx) => {
    const [call] = await tx<[{ id: number }?]>`
      update calls set status = 'ended', outcome = ${f.outcome}, connected_seconds = ${f.connectedSeconds}, cost_minor = ${f.costMinor},
        reserved_minor = coalesce(${f.reservedMinor}, reserved_minor), ended_at = ${f.endedAt}
      where id = ${f.callId} and status <> 'ended' and owner_instance = ${f.me}
      returning id`
    if (!call) return false // finalised by a process that took the run over
    await tx`delete from dial_slots where call_id = ${f.callId}`
    if (f.next.kind === "done")
      await tx`update run_targets set status = 'done', outcome = ${f.next.outcome}, updated_at = now() where id = ${f.runTargetId}`
    else if (f.next.kind === "retry")
      await tx`update run_targets set status = 'waiting', outcome = ${f.next.outcome}, next_attempt_at = ${new Date(f.next.at)}, updated_at = now() where id = ${f.runTargetId}`
    // attempts keeps counting it: it numbers the call rows, and (run_target_id, attempt) is unique.
    else await tx`update run_targets set status = 'queued', updated_at = now() where id = ${f.runTargetId}`
    if (f.addToDnc)
      await tx`
        insert into dnc_entries (tenant_id, phone_e164, reason, source) values (${f.tenantId}, ${f.phone}, 'asked not to be called again', 'call')
        on conflict (tenant_id, phone_e164) do nothing`
    await insertDecision(tx, f.tenantId, f.runId, f.callId, f.decision)
    return true
  })) as boolean

/** A target the dialer will not call (compliance) or holds until its window opens. */
export const skipTarget = async (sql: Sql, tenantId: number, runId: number, runTargetId: number, d: DialDecision): Promise<void> => {
  await sql.begin(async (tx) => {
    await tx`update run_targets set status = 'skipped', outcome = ${d.reason}, updated_at = now() where id = ${runTargetId} and status in ('queued', 'waiting')`
    await insertDecision(tx, tenantId, runId, null, d)
  })
}

export const holdTarget = async (sql: Sql, tenantId: number, runId: number, runTargetId: number, until: Date, d: DialDecision): Promise<void> => {
  await sql.begin(async (tx) => {
    await tx`update run_targets set status = 'waiting', next_attempt_at = ${until}, updated_at = now() where id = ${runTargetId} and status in ('queued', 'waiting')`
    await insertDecision(tx, tenantId, runId, null, d)
  })
}

export interface OrphanCall {
  readonly id: number
  readonly run_target_id: number
  readonly target_id: number
  readonly phone_e164: string
  readonly answered_at: Date | null
  readonly last_turn_at: Date | null
}

/** Calls a previous owner left in flight. */
export const orphanCalls = (sql: Sql, runId: number, me: string) =>
  sql<OrphanCall[]>`
    select c.id, c.run_target_id, c.target_id, c.phone_e164, c.answered_at,
           (select max(t.at) from turns t where t.call_id = c.id) as last_turn_at
    from calls c where c.run_id = ${runId} and c.status <> 'ended' and c.owner_instance <> ${me}`

/** Takes an orphaned call over so this process may finish it (finishAttempt checks the owner). */
export const adoptCall = (sql: Sql, callId: number, me: string) => sql`update calls set owner_instance = ${me} where id = ${callId} and status <> 'ended'`

/** Reserves `count` turn sequence numbers of the run; returns the first. */
export const reserveTurnSeqs = async (sql: Sql, runId: number, count: number): Promise<number> => {
  const [row] = await sql<[{ last: number }]>`update runs set turn_seq = turn_seq + ${count} where id = ${runId} returning turn_seq as last`
  return row.last - count + 1
}

export interface TurnRow {
  readonly tenant_id: number
  readonly run_id: number
  readonly target_id: number
  readonly call_id: number
  readonly seq: number
  readonly turn_index: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly at: Date
}

export const insertTurns = (sql: Sql, rows: TurnRow[]) =>
  sql`
    insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
    select * from unnest(
      ${rows.map((r) => r.tenant_id)}::bigint[], ${rows.map((r) => r.run_id)}::bigint[], ${rows.map((r) => r.target_id)}::bigint[],
      ${rows.map((r) => r.call_id)}::bigint[], ${rows.map((r) => r.seq)}::bigint[], ${rows.map((r) => r.turn_index)}::int[],
      ${rows.map((r) => r.speaker)}::text[], ${rows.map((r) => r.text)}::text[], ${rows.map((r) => r.at.toISOString())}::timestamptz[])
    on conflict do nothing`

export const saveRunSnapshot = (sql: Sql, runId: number, me: string, snapshot: unknown, version: number) =>
  sql`update runs set snapshot = ${sql.json(snapshot as never)}, machine_version = ${version}, updated_at = now() where id = ${runId} and owner_instance = ${me}`

/** Records the run's end (or pause) as the run actor reaches it; only the owner may. */
export const setRunStatus = async (sql: Sql, runId: number, me: string, status: "completed" | "cancelled" | "failed" | "paused", reason: string | null): Promise<void> => {
  if (status === "paused") {
    await sql`update runs set status = 'paused', pause_reason = coalesce(pause_reason, ${reason}), updated_at = now() where id = ${runId} and owner_instance = ${me} and status in ('running', 'paused')`
    return
  }
  await sql`
    update runs set status = ${status}, end_reason = ${reason}, ended_at = coalesce(ended_at, now()), owner_instance = null, lease_expires_at = null, updated_at = now()
    where id = ${runId} and owner_instance = ${me} and status in ('running', 'paused')`
}

/** The wallet ran dry: the run and its workflow pause, so POST run resumes them. */
export const pauseForFunds = async (sql: Sql, runId: number, me: string): Promise<void> => {
  await sql.begin(async (tx) => {
    const [run] = await tx<[{ workflow_id: number }?]>`
      update runs set status = 'paused', pause_reason = 'insufficient_funds', updated_at = now()
      where id = ${runId} and owner_instance = ${me} and status = 'running'
      returning workflow_id`
    if (run) await tx`update workflows set status = 'paused', updated_at = now() where id = ${run.workflow_id} and status = 'live'`
  })
}

export interface NewApproval {
  readonly tenantId: number
  readonly workflowId: number
  readonly runId: number
  readonly callId: number
  readonly phone: string
  readonly action: "concession" | "callback" | "escalate"
  readonly valueMinor: number | null
  readonly currency: "INR" | "USD"
  readonly rationale: string
  readonly context: Record<string, unknown>
  readonly ttlMs: number
}

export const insertApproval = async (sql: Sql, a: NewApproval): Promise<{ id: number; expires_at: Date; created_at: Date }> => {
  const [row] = await sql<[{ id: number; expires_at: Date; created_at: Date }]>`
    insert into approvals (tenant_id, workflow_id, run_id, call_id, target_phone, proposed_action, proposed_value_minor, currency, rationale, context, expires_at)
    values (${a.tenantId}, ${a.workflowId}, ${a.runId}, ${a.callId}, ${a.phone}, ${a.action}, ${a.valueMinor}, ${a.currency}, ${a.rationale},
            ${sql.json(a.context as never)}, now() + ${a.ttlMs} * interval '1 millisecond')
    returning id, expires_at, created_at`
  return row
}

export const saveApprovalSnapshot = (sql: Sql, approvalId: number, snapshot: unknown, version: number) =>
  sql`update approvals set snapshot = ${sql.json(snapshot as never)}, machine_version = ${version} where id = ${approvalId}`

/** Expiry is decided in Postgres: only a still-pending approval expires. */
export const expireApproval = (sql: Sql, approvalId: number) =>
  sql`update approvals set status = 'expired' where id = ${approvalId} and status = 'pending' and expires_at <= now()`

/** Every runtime process sweeps approvals whose actor is gone (their run ended or moved). */
export const expireDueApprovals = (sql: Sql) => sql`update approvals set status = 'expired' where status = 'pending' and expires_at <= now()`

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

export const approvalStatusOf = async (sql: Sql, approvalId: number): Promise<{ status: string; decided_by: number | null; decided_at: Date | null } | undefined> => {
  const [row] = await sql<[{ status: string; decided_by: number | null; decided_at: Date | null }?]>`
    select status, decided_by, decided_at from approvals where id = ${approvalId}`
  return row
}
