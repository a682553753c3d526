// SQL of a call attempt, as the runtime's dialer runs it: the attempt that marks a target dialing
// before the carrier is asked, the answer, the end of an attempt, targets skipped or held, calls a
// previous owner left in flight, hang-ups the carrier did not take (kept for the sweep), the
// tenant's dial slots (one counter row per workspace and runtime process), and the decision log
// (dial_decisions) each of those writes. A batch of attempts begins
// in one round trip, in the database function dial_begin_attempts (migrations/0026), which marks
// the targets dialing as markTargetDialing in run-targets.repo.ts does. Writes are conditional on
// the calling process owning the run or call. The targets' other moves (an ended attempt's next
// step among them) are written by src/runs/run-targets.repo.ts, the DNC entry of a callee who asked
// not to be called again by src/compliance/dnc.repo.ts, and an answered call's place in the
// post-call analysis queue by src/analysis/analysis.repo.ts, inside these transactions.
import { enqueueCalls } from "../analysis/analysis.repo.js"
import { addDncFromCall } from "../compliance/dnc.repo.js"
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import { holdTargetUntil, markTargetSkipped, moveTargetsOn, type TargetNext } from "../runs/run-targets.repo.js"
import { type CallObjectRow, callEndedEvent } from "../webhooks/event-data.js"
import { emitEvents } from "../webhooks/outbox.repo.js"

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

/** The experiment arm a call is placed in (src/experiments/assignment.ts), kept on its row. */
export interface CallArmRef {
  readonly experimentId: number
  readonly arm: string
}

export type AttemptRefusal = "not_owner" | "not_due" | "tenant_cap"

export interface BegunAttempt {
  readonly callId: number
  readonly attempt: number
  readonly targetId: number
  readonly phone: string
}

export interface AttemptBatch {
  me: string
  runId: number
  tenantId: number
  workflowId: number
  provider: string
  /** The workspace's concurrent-call cap, across every runtime process. */
  tenantCap: number
  /** How long this process's slot row counts without being renewed. */
  slotLeaseMs: number
  /** false: no cool-down record (a simulation campaign's callee is not a person); default true. */
  recordContact?: boolean
}

/**
 * Begins a batch of one run's attempts in one round trip (migrations/0026: dial_begin_attempts),
 * before the carrier is asked: each target marked dialing, its call row, the cool-down record and
 * the decision, and the workspace's slots in this process's counter row. A process that takes the
 * run over sees every attempt and never dials one again. Per target, in order: the attempt, or why
 * it was refused: this process no longer owns the running run, the target is no longer due, or the
 * workspace's concurrent-call cap is reached (then every later target of the batch is refused too).
 */
export const beginAttempts = async (
  sql: Sql,
  a: AttemptBatch,
  items: ReadonlyArray<{ runTargetId: number; decision: DecisionEntry; arm?: CallArmRef | undefined }>,
): Promise<Array<BegunAttempt | AttemptRefusal>> => {
  if (items.length === 0) return []
  const decisions = items.map(({ decision: d, arm }) => ({
    target_id: Number(d.targetId),
    decision: d.decision,
    reason: d.reason,
    detail: d.detail,
    cost_minor: d.costMinor,
    at: d.at,
    ...(arm !== undefined && { experiment_id: arm.experimentId, arm: arm.arm }),
  }))
  const rows = await sql<
    {
      o_run_target_id: number
      o_call_id: number | null
      o_attempt: number | null
      o_target_id: number | null
      o_phone: string | null
      o_refusal: AttemptRefusal | null
    }[]
  >`select * from dial_begin_attempts(${a.runId}, ${a.me}, ${a.tenantId}, ${a.workflowId}, ${a.provider},
      ${Math.min(Math.floor(a.tenantCap), 2_147_483_647)}, ${Math.min(Math.floor(a.slotLeaseMs), 2_147_483_647)},
      ${a.recordContact !== false}, ${items.map((i) => i.runTargetId)}::bigint[],
      ${sql.json(decisions as never)}::jsonb) with ordinality order by ordinality`
  // A row per target, in the batch's order.
  return items.map((_, i) => {
    const r = rows[i]
    if (r === undefined || r.o_call_id === null) return r?.o_refusal ?? "not_due"
    return { callId: Number(r.o_call_id), attempt: r.o_attempt!, targetId: Number(r.o_target_id), phone: r.o_phone! }
  })
}

/** One attempt (beginAttempts with one target). */
export const beginAttempt = async (
  sql: Sql,
  a: AttemptBatch & { runTargetId: number; decision: DecisionEntry },
): Promise<BegunAttempt | AttemptRefusal> => {
  const [r] = await beginAttempts(sql, a, [{ runTargetId: a.runTargetId, decision: a.decision }])
  return r ?? "not_due"
}

/** The workspace's calls in flight counted in its slot rows (every runtime process whose lease is fresh). */
export const slotsInUse = async (sql: Sql, tenantId: number): Promise<number> => {
  const [row] = await sql<[{ n: number }]>`
    select coalesce(sum(in_use), 0)::int as n from dial_slot_counts where tenant_id = ${tenantId}
      and expires_at > now()`
  return row.n
}

/** Marks many calls answered in one statement (the answers that came while the last write was in flight). */
export const markAnsweredMany = (sql: Sql, answers: ReadonlyArray<{ callId: number; at: Date }>) =>
  sql`update calls c set status = 'connected', answered_at = a.at
    from unnest(${answers.map((x) => x.callId)}::bigint[], ${answers.map((x) => x.at.toISOString())}::timestamptz[])
      as a(id, at)
    where c.id = a.id and c.status = 'dialing'`

export type { TargetNext } from "../runs/run-targets.repo.js"

/** The end of one attempt, as finishAttempts records it. */
export interface AttemptEnd {
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
}

/** An ended call as its ending statement returns it: the slot row to give back, and the call's event data. */
interface EndedCall extends CallObjectRow {
  readonly slot_owner: string | null
  /** A rehearsal campaign's call (src/rehearsals/): hidden from the workflow endpoints, it sends no event. */
  readonly simulation: boolean
}

/** The RETURNING list of an ending `update calls` (name, currency, simulation flag: subqueries, no round trip). */
const endedCallColumns = (tx: Tx, alias = "calls") => {
  const c = tx(alias)
  return tx`${c}.id, ${c}.tenant_id, ${c}.run_id, ${c}.workflow_id, ${c}.target_id, ${c}.attempt,
    ${c}.phone_e164 as phone, ${c}.provider, ${c}.status, ${c}.outcome, ${c}.connected_seconds, ${c}.reserved_minor,
    ${c}.cost_minor, ${c}.started_at, ${c}.answered_at, ${c}.ended_at, ${c}.slot_owner, ${c}.provider_failures,
    ${c}.experiment_id::int, ${c}.arm,
    (select au.name from audience_targets au where au.id = ${c}.target_id) as name,
    (select t.currency from tenants t where t.id = ${c}.tenant_id) as currency,
    exists (select 1 from workflows w where w.id = ${c}.workflow_id and w.kind = 'rehearsal') as simulation`
}

const callEndedEvents = (calls: readonly EndedCall[]) => calls.filter((c) => !c.simulation).map(callEndedEvent)

/**
 * Ends a group of attempts (the calls that ended while the previous group was being written), in
 * one transaction: the call rows, the targets' next steps and the decisions in one statement each
 * (the DNC entries pipelined), and each slot row's count given back once, last.
 * Per attempt, in order: whether this call ended it (false: already ended, by this group's earlier
 * entry for the same call or by a process that took the run over).
 */
export const finishAttempts = async (sql: Sql, fs: readonly AttemptEnd[]): Promise<boolean[]> => {
  if (fs.length === 0) return []
  const first = new Map<number, AttemptEnd>()
  for (const f of fs) if (!first.has(f.callId)) first.set(f.callId, f)
  const rows = [...first.values()].map((f) => ({
    id: f.callId,
    me: f.me,
    outcome: f.outcome,
    secs: f.connectedSeconds,
    cost: f.costMinor,
    reserved: f.reservedMinor,
    ended_at: f.endedAt.toISOString(),
  }))
  const ended = (await sql.begin(async (tx) => {
    const done = await tx<EndedCall[]>`
      update calls c set status = 'ended', outcome = u.outcome, connected_seconds = u.secs, cost_minor = u.cost,
        reserved_minor = coalesce(u.reserved, c.reserved_minor), ended_at = u.ended_at
      from jsonb_to_recordset(${tx.json(rows as never)}::jsonb) as u(id bigint, me text, outcome text, secs integer,
        cost bigint, reserved bigint, ended_at timestamptz)
      where c.id = u.id and c.status <> 'ended' and c.owner_instance = u.me
      returning ${endedCallColumns(tx, "c")}`
    if (done.length === 0) return new Set<number>()
    // call.completed / call.failed of the whole group in one statement, committed with the ends.
    await emitEvents(tx, callEndedEvents(done))
    // The answered ones queued for their analysis in one statement, with their ends.
    await enqueueCalls(
      tx,
      done.filter((d) => d.answered_at !== null).map((d) => Number(d.id)),
    )
    const mine = done.map((d) => first.get(Number(d.id))!)
    await moveTargetsOn(tx, mine)
    await Promise.all(mine.filter((f) => f.addToDnc).map((f) => addDncFromCall(tx, f.tenantId, f.phone)))
    const decisions = mine.map((f) => ({
      tenant_id: f.tenantId,
      run_id: f.runId,
      target_id: Number(f.decision.targetId),
      call_id: f.callId,
      decision: f.decision.decision,
      reason: f.decision.reason,
      detail: f.decision.detail,
      cost_minor: f.decision.costMinor,
      at: new Date(f.decision.at).toISOString(),
    }))
    await tx`insert into dial_decisions
        (tenant_id, run_id, target_id, call_id, decision, reason, detail, cost_minor, at)
      select tenant_id, run_id, target_id, call_id, decision, reason, coalesce(detail, '{}'::jsonb), cost_minor, at
      from jsonb_to_recordset(${tx.json(decisions as never)}::jsonb) as d(tenant_id bigint, run_id bigint,
        target_id bigint, call_id bigint, decision text, reason text, detail jsonb, cost_minor bigint, at timestamptz)`
    // The slots go back to the rows they were counted in, last, once per row (in one order: rows are shared).
    const freed = new Map<string, { tenant: number; owner: string; n: number }>()
    for (const d of done) {
      if (d.slot_owner === null) continue
      const f = first.get(Number(d.id))!
      const key = `${f.tenantId}\u0000${d.slot_owner}`
      const x = freed.get(key)
      if (x === undefined) freed.set(key, { tenant: f.tenantId, owner: d.slot_owner, n: 1 })
      else x.n++
    }
    const slots = [...freed.values()].sort((a, b) => a.tenant - b.tenant || (a.owner < b.owner ? -1 : 1))
    for (const x of slots)
      await tx`update dial_slot_counts set in_use = greatest(0, in_use - ${x.n})
        where tenant_id = ${x.tenant} and owner_instance = ${x.owner}`
    return new Set(done.map((d) => Number(d.id)))
  })) as Set<number>
  const answered = new Set<number>()
  return fs.map((f) => {
    if (!ended.has(f.callId) || answered.has(f.callId)) return false
    answered.add(f.callId)
    return true
  })
}

/** Ends one attempt (finishAttempts with one); false when it was already ended. */
export const finishAttempt = async (sql: Sql, f: AttemptEnd): Promise<boolean> =>
  (await finishAttempts(sql, [f]))[0] ?? false

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

// ---- Hang-ups the carrier did not take (runtime/actors/hangups.ts) ------------------------------------

/** Marks a call whose hang-up failed: the sweep tries again from `retryAt`, by the carrier's id of the call. */
export const markHangupPending = async (
  sql: Sql,
  m: { callId: number; providerCallId: string | null; error: string; retryAt: Date },
): Promise<void> => {
  await sql`update calls set hangup_state = 'pending', hangup_failed_at = coalesce(hangup_failed_at, now()),
      hangup_failures = hangup_failures + 1, hangup_error = ${m.error}, hangup_retry_at = ${m.retryAt},
      provider_call_id = coalesce(${m.providerCallId}, provider_call_id)
    where id = ${m.callId}`
}

/** A call whose hang-up is pending, as the sweep takes it. */
export interface PendingHangup {
  readonly id: number
  readonly tenant_id: number
  readonly run_id: number
  readonly provider: string
  readonly provider_call_id: string | null
  readonly hangup_failures: number
  readonly hangup_failed_at: Date
}

/**
 * Up to `limit` pending hang-ups due at `asOf`, each put off to `nextAt` as it is taken, so that
 * another process's sweep meanwhile passes it by (SKIP LOCKED: two sweeps never wait on each other).
 */
export const takeDueHangups = (sql: Sql, asOf: Date, nextAt: Date, limit: number) =>
  sql<PendingHangup[]>`update calls c set hangup_retry_at = ${nextAt}
    where c.id in (select id from calls where hangup_state = 'pending' and hangup_retry_at <= ${asOf}
      order by hangup_retry_at limit ${limit} for update skip locked)
    returning c.id, c.tenant_id, c.run_id, c.provider, c.provider_call_id, c.hangup_failures, c.hangup_failed_at`

/** What the sweep's try did: the carrier took it (swept), or it failed again (pending, or abandoned for good). */
export const recordHangupTry = async (
  sql: Sql,
  callId: number,
  r: { state: "swept" } | { state: "pending" | "abandoned"; error: string },
): Promise<void> => {
  if (r.state === "swept") await sql`update calls set hangup_state = 'swept' where id = ${callId}`
  else
    await sql`update calls set hangup_state = ${r.state}, hangup_failures = hangup_failures + 1,
      hangup_error = ${r.error} where id = ${callId}`
}

/** Calls a previous owner left in flight. */
export const orphanCalls = (sql: Sql, runId: number, me: string) =>
  sql<OrphanCall[]>`
    select c.id, c.run_target_id, c.target_id, c.phone_e164, c.answered_at,
           (select max(t.at) from turns t where t.call_id = c.id) as last_turn_at
    from calls c where c.run_id = ${runId} and c.status <> 'ended' and c.owner_instance <> ${me}`

/** Takes orphaned calls over, in one statement, so this process may finish them (finishAttempts checks the owner). */
export const adoptCalls = (sql: Sql, callIds: readonly number[], me: string) =>
  sql`update calls set owner_instance = ${me} where id = any(${callIds as number[]}::bigint[]) and status <> 'ended'`

/**
 * Extends this process's slot rows (renewed with its run leases) and drops rows whose process has
 * been gone an hour (their calls were finished by whoever took their runs over).
 */
export const renewDialSlots = async (sql: Sql, me: string, leaseMs: number): Promise<void> => {
  await sql`update dial_slot_counts set expires_at = now() + ${leaseMs} * interval '1 millisecond'
    where owner_instance = ${me}`
  await sql`delete from dial_slot_counts where expires_at < now() - interval '1 hour'`
}

// --- a data-subject erase (src/dsr/) ---------------------------------------------------------------

/** The workspace's calls with this number not over yet (the runtime still holds them). */
export const liveCallsWith = async (
  tx: Tx,
  tenantId: number,
  phone: string,
): Promise<{ id: number; run_id: number }[]> => [
  ...(await tx<{ id: number; run_id: number }[]>`
    select id, run_id from calls where tenant_id = ${tenantId} and phone_e164 = ${phone} and status <> 'ended'`),
]

/** The contact's calls: to one of its targets or numbers. */
export const contactCallIds = async (
  tx: Tx,
  tenantId: number,
  targetIds: readonly number[],
  phones: readonly string[],
): Promise<number[]> =>
  (
    await tx<{ id: number }[]>`
    select id from calls where tenant_id = ${tenantId} and (target_id = any(${tx.array([...targetIds])}::bigint[])
      or phone_e164 = any(${tx.array([...phones])}::text[]))`
  ).map((r) => r.id)

/** The calls stay (usage and ledger entries reference them as `call:<id>`), the marker for the number. */
export const eraseCallPhones = async (tx: Tx, callIds: readonly number[], marker: string): Promise<number> =>
  (await tx`update calls set phone_e164 = ${marker} where id = any(${tx.array([...callIds])}::bigint[])`).count

/** The numbers' cool-down records go (dial_begin_attempts writes them). */
export const forgetRecentContacts = async (tx: Tx, tenantId: number, phones: readonly string[]): Promise<number> =>
  (
    await tx`
    delete from recent_contacts where tenant_id = ${tenantId} and phone_e164 = any(${tx.array([...phones])}::text[])`
  ).count

/** The decision log is kept, the contact scrubbed out of its details and reasons. */
export const scrubDialDecisions = async (tx: Tx, m: ContactMatch): Promise<number> =>
  (
    await tx`
    update dial_decisions set detail = ${m.scrub("detail")}::jsonb, reason = ${m.scrub("reason")}
    where tenant_id = ${m.tenantId} and (${m.mentions("detail")} or ${m.mentions("reason")})`
  ).count

/** The most vendor failures a call keeps (each stage fails a call once; the rest is noise). */
const MAX_PROVIDER_FAILURES = 10

/** Adds a hosted speech vendor's failure to the call's record (migration 0051), up to the cap. */
export const recordProviderFailure = async (
  sql: Sql,
  callId: number,
  f: { readonly stage: string; readonly provider: string; readonly message: string; readonly at: Date },
): Promise<void> => {
  const entry = { at: f.at.toISOString(), stage: f.stage, provider: f.provider, message: f.message.slice(0, 300) }
  await sql`
    update calls set provider_failures = provider_failures || jsonb_build_array(${sql.json(entry)}::jsonb)
    where id = ${callId} and jsonb_array_length(provider_failures) < ${MAX_PROVIDER_FAILURES}`
}
