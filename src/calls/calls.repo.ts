// SQL of a call attempt, as the runtime's dialer runs it: the attempt that marks a target dialing
// before the carrier is asked, the answer, the end of an attempt, targets skipped or held, calls a
// previous owner left in flight, the tenant's dial slots, and the decision log (dial_decisions)
// each of those writes. Writes are conditional on the calling process owning the run or call. The
// target's own rows are written by src/runs/run-targets.repo.ts, the DNC entry of a callee who asked
// not to be called again by src/compliance/dnc.repo.ts, inside these transactions.
import { addDncFromCall } from "../compliance/dnc.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import {
  holdTargetUntil,
  markTargetDialing,
  markTargetSkipped,
  setTargetLastCall,
  settleTarget,
  type TargetNext,
} from "../runs/run-targets.repo.js"

/** One line of the decision log (the runtime's DialDecision). */
export interface DecisionEntry {
  readonly targetId: number | string
  /** Epoch ms. */
  readonly at: number
  readonly decision: string
  readonly reason: string
  readonly detail: Record<string, unknown>
  readonly costMinor: number | null
}

const insertDecision = (tx: Tx | Sql, tenantId: number, runId: number, callId: number | null, d: DecisionEntry) => tx`
  insert into dial_decisions (tenant_id, run_id, target_id, call_id, decision, reason, detail, cost_minor, at)
  values (${tenantId}, ${runId}, ${Number(d.targetId)}, ${callId}, ${d.decision}, ${d.reason},
    ${tx.json(d.detail as never)}, ${d.costMinor}, ${new Date(d.at)})`

export type AttemptRefusal = "not_owner" | "not_due" | "tenant_cap"

/**
 * Marks the target dialing and writes the call row, the tenant slot, the decision and the
 * cool-down record in one transaction, before the carrier is asked: a process that takes the run
 * over sees the attempt and never dials it again. Refused when this process no longer owns the
 * running run, the target is no longer due, or the tenant's concurrent-call cap is reached.
 */
export const beginAttempt = async (
  sql: Sql,
  a: {
    me: string
    runId: number
    tenantId: number
    workflowId: number
    runTargetId: number
    provider: string
    tenantCap: number
    slotLeaseMs: number
    decision: DecisionEntry
    /** false: no cool-down record (a simulation campaign's callee is not a person); default true. */
    recordContact?: boolean
  },
): Promise<{ callId: number; attempt: number; targetId: number; phone: string } | AttemptRefusal> => {
  try {
    return (await sql.begin(async (tx) => {
      const [run] = await tx<[{ ok: boolean }?]>`
        select true as ok from runs where id = ${a.runId} and owner_instance = ${a.me} and status = 'running' for share`
      if (!run) return "not_owner"
      const target = await markTargetDialing(tx, a.runId, a.runTargetId)
      if (!target) return "not_due"
      const [call] = await tx<[{ id: number }]>`
        insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
          owner_instance)
        values (${a.tenantId}, ${a.runId}, ${a.workflowId}, ${a.runTargetId}, ${target.target_id}, ${target.attempts},
          ${target.phone_e164}, ${a.provider}, ${a.me})
        returning id`
      await setTargetLastCall(tx, a.runTargetId, call.id)
      if (a.recordContact !== false)
        await tx`
          insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values (${a.tenantId},
            ${target.phone_e164}, now())
          on conflict (tenant_id, phone_e164) do update set last_contacted_at = excluded.last_contacted_at`
      await insertDecision(tx, a.tenantId, a.runId, call.id, {
        ...a.decision,
        detail: { ...a.decision.detail, attempt: target.attempts },
      })
      // The tenant's concurrency last: its lock serialises every attempt of the tenant across
      // processes, so it is held for as few statements as possible (count, slot, commit).
      await tx`select pg_advisory_xact_lock(hashtextextended('dial_slots:' || ${a.tenantId}::text, 0))`
      const [{ in_use }] = await tx<[{ in_use: number }]>`
        select count(*)::int as in_use from dial_slots where tenant_id = ${a.tenantId} and expires_at > now()`
      if (in_use >= a.tenantCap) throw new TenantCapReached()
      await tx`
        insert into dial_slots (call_id, tenant_id, workflow_id, owner_instance, expires_at)
        values (${call.id}, ${a.tenantId}, ${a.workflowId}, ${a.me},
          now() + ${a.slotLeaseMs} * interval '1 millisecond')`
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

export type { TargetNext } from "../runs/run-targets.repo.js"

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
    decision: DecisionEntry
    addToDnc: boolean
    phone: string
  },
): Promise<boolean> =>
  (await sql.begin(async (tx) => {
    const [call] = await tx<[{ id: number }?]>`
      update calls set status = 'ended', outcome = ${f.outcome}, connected_seconds = ${f.connectedSeconds},
        cost_minor = ${f.costMinor},
        reserved_minor = coalesce(${f.reservedMinor}, reserved_minor), ended_at = ${f.endedAt}
      where id = ${f.callId} and status <> 'ended' and owner_instance = ${f.me}
      returning id`
    if (!call) return false // finalised by a process that took the run over
    await tx`delete from dial_slots where call_id = ${f.callId}`
    await settleTarget(tx, f.runTargetId, f.next)
    if (f.addToDnc) await addDncFromCall(tx, f.tenantId, f.phone)
    await insertDecision(tx, f.tenantId, f.runId, f.callId, f.decision)
    return true
  })) as boolean

/** A target the dialer will not call (compliance) or holds until its window opens. */
export const skipTarget = async (
  sql: Sql,
  tenantId: number,
  runId: number,
  runTargetId: number,
  d: DecisionEntry,
): Promise<void> => {
  await sql.begin(async (tx) => {
    await markTargetSkipped(tx, runTargetId, d.reason)
    await insertDecision(tx, tenantId, runId, null, d)
  })
}

export const holdTarget = async (
  sql: Sql,
  tenantId: number,
  runId: number,
  runTargetId: number,
  until: Date,
  d: DecisionEntry,
): Promise<void> => {
  await sql.begin(async (tx) => {
    await holdTargetUntil(tx, runTargetId, until)
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
export const adoptCall = (sql: Sql, callId: number, me: string) =>
  sql`update calls set owner_instance = ${me} where id = ${callId} and status <> 'ended'`

/** Extends the dial slots this process holds (renewed with its run leases). */
export const renewDialSlots = async (sql: Sql, me: string, leaseMs: number): Promise<void> => {
  await sql`update dial_slots set expires_at = now() + ${leaseMs} * interval '1 millisecond'
    where owner_instance = ${me}`
}
