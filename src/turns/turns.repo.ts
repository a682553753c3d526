// SQL for reading turns (stream history, live calls) and storing them: the runtime's own and those
// external orchestrators send through POST /internal/turns, a batch per statement, with their
// run-wide seqs taken from the run's row in run_turn_seqs (migrations/0029) by the same statement.
import type { Sql, Tx } from "../platform/Db.js"
import type { TurnLatency } from "../providers/telephony/telephony.interface.js"
import { type TurnMessage, withAudio } from "./turn.message.js"

export const findRunOfTenant = async (
  sql: Sql,
  tenantId: number,
  runId: number,
): Promise<{ id: number; status: string } | undefined> => {
  const [row] = await sql<
    [{ id: number; status: string }?]
  >`select id, status from runs where id = ${runId} and tenant_id = ${tenantId}`
  return row
}

/** Turns of a run after `sinceSeq`, oldest first, optionally of one target. */
export const turnsAfter = async (
  sql: Sql,
  runId: number,
  sinceSeq: number,
  targetId: number | undefined,
  limit: number,
): Promise<TurnMessage[]> =>
  (
    await sql<Array<TurnMessage & { interrupted: boolean; latency_ms: TurnLatency | null; arm: string | null }>>`
    select t.id as turn_id, t.seq, t.run_id, t.target_id, t.call_id, t.turn_index, t.speaker, t.text,
      to_char(t.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, t.outcome_id, t.interrupted,
      t.latency_ms, c.arm
    from turns t left join calls c on c.id = t.call_id
    where t.run_id = ${runId} and t.seq > ${sinceSeq}
      ${targetId === undefined ? sql`` : sql`and t.target_id = ${targetId}`}
    order by t.seq
    limit ${limit}`
  ).map(withAudio)

/** The run's last committed seq (0 before its first turn): what its seq row has handed out. */
export const lastTurnSeq = async (sql: Sql, runId: number): Promise<number> => {
  const [row] = await sql<[{ last_seq: number }?]>`select last_seq from run_turn_seqs where run_id = ${runId}`
  return Number(row?.last_seq ?? 0)
}

export interface LiveCallRow {
  readonly call_id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly target_id: number
  readonly phone_e164: string
  readonly status: string
  readonly attempt: number
  readonly started_at: Date
  readonly answered_at: Date | null
  readonly turns: number
  readonly last_seq: number | null
  /** The callee's name from the audience, and the campaign's. */
  readonly target_name: string | null
  readonly workflow_name: string
  /** The approval the callee is held for, while they hold (pending, hold not run out). */
  readonly on_hold_approval_id: number | null
  readonly on_hold_until: string | null
}

export const liveCalls = (sql: Sql, tenantId: number, runId: number | undefined, limit: number) =>
  sql<LiveCallRow[]>`
    select c.id as call_id, c.run_id, c.workflow_id, c.target_id, c.phone_e164, c.status, c.attempt, c.started_at,
      c.answered_at,
           (select count(*)::int from turns t where t.call_id = c.id) as turns,
           (select max(t.seq) from turns t where t.call_id = c.id) as last_seq,
           au.name as target_name, w.name as workflow_name,
           h.id as on_hold_approval_id, h.hold_until as on_hold_until
    from calls c
    join workflows w on w.id = c.workflow_id
    left join audience_targets au on au.id = c.target_id
    left join lateral (
      select a.id, a.context ->> 'hold_until' as hold_until from approvals a
      where a.call_id = c.id and a.status = 'pending' and a.expires_at > now()
        and coalesce((a.context ->> 'hold_until')::timestamptz > now(), true)
      order by a.id desc limit 1
    ) h on true
    where c.tenant_id = ${tenantId} and c.status <> 'ended'
      ${runId === undefined ? sql`` : sql`and c.run_id = ${runId}`}
    order by c.started_at desc, c.id desc
    limit ${limit}`

/** One turn to store; its run-wide seq is assigned by the statement that stores it. */
export interface TurnToStore {
  readonly tenantId: number
  readonly runId: number
  readonly targetId: number
  readonly callId: number | null
  readonly turnIndex: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly outcomeId: string | null
  readonly at: Date
  /** A call heard as audio: an agent turn cut short by the callee, and its latency by stage. */
  readonly interrupted?: boolean
  readonly latencyMs?: TurnLatency | null
  /** The experiment arm of its call (not stored on the turn: the call keeps it); carried to watchers. */
  readonly arm?: string
}

/**
 * Stores one run's turns in one statement and one round trip: the run's seq row (run_turn_seqs)
 * hands out exactly as many seqs as there are new turns, in order, and stays locked until the
 * statement commits, so a run's seqs are in commit order whichever process stores them. A turn
 * already stored under its (outcome_id, turn_index) is skipped before seqs are taken; one that
 * loses a race on a unique key is skipped too (its seq is left unused). Answers the stored ones by
 * their index in `turns`.
 */
export const storeTurnBatch = async (
  sql: Sql,
  runId: number,
  turns: readonly TurnToStore[],
): Promise<Array<{ ord: number; id: number; seq: number }>> => {
  if (turns.length === 0) return []
  return await sql<Array<{ ord: number; id: number; seq: number }>>`
    with u as (
      select * from unnest(
        ${turns.map((t) => t.tenantId)}::bigint[], ${turns.map((t) => t.targetId)}::bigint[],
        ${turns.map((t) => t.callId)}::bigint[], ${turns.map((t) => t.turnIndex)}::int[],
        ${turns.map((t) => t.speaker)}::text[], ${turns.map((t) => t.text)}::text[],
        ${turns.map((t) => t.outcomeId)}::text[], ${turns.map((t) => t.at.toISOString())}::timestamptz[],
        ${turns.map((t) => (t.interrupted === true ? "t" : "f"))}::text[],
        ${turns.map((t) => (t.latencyMs == null ? null : JSON.stringify(t.latencyMs)))}::text[]
      ) with ordinality as u (tenant_id, target_id, call_id, turn_index, speaker, text, outcome_id, at, interrupted,
        latency_ms, ord)
    ),
    fresh as (
      select u.*, row_number() over (order by u.ord) as rn from u
      where u.outcome_id is null or not exists (
        select 1 from turns t
        where t.tenant_id = u.tenant_id and t.outcome_id = u.outcome_id and t.turn_index = u.turn_index)
    ),
    s as (
      insert into run_turn_seqs as q (run_id, last_seq) select ${runId}, count(*) from fresh
      on conflict (run_id) do update set last_seq = q.last_seq + excluded.last_seq
      returning last_seq
    ),
    numbered as (select f.*, s.last_seq - (select count(*) from fresh) + f.rn as seq from fresh f, s),
    ins as (
      insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, outcome_id, at,
        interrupted, latency_ms)
      select tenant_id, ${runId}, target_id, call_id, seq, turn_index, speaker, text, outcome_id, at,
        interrupted::boolean, latency_ms::jsonb
      from numbered order by seq
      on conflict do nothing
      returning id, seq
    )
    select (n.ord - 1)::int as ord, i.id, i.seq from ins i join numbered n on n.seq = i.seq`
}

/**
 * The turns already stored under the keys of turns that were not stored (duplicates): by
 * (outcome_id, turn_index) when one has an outcome id, by (call_id, turn_index) otherwise; always
 * within the tenant. Answers them by their index in `keys`.
 */
export const existingTurns = (
  sql: Sql,
  keys: ReadonlyArray<{ tenantId: number; outcomeId: string | null; callId: number | null; turnIndex: number }>,
) =>
  sql<Array<TurnMessage & { ord: number }>>`
    select (u.ord - 1)::int as ord, t.id as turn_id, t.seq, t.run_id, t.target_id, t.call_id, t.turn_index, t.speaker,
      t.text, to_char(t.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, t.outcome_id
    from unnest(${keys.map((k) => k.tenantId)}::bigint[], ${keys.map((k) => k.outcomeId)}::text[],
      ${keys.map((k) => k.callId)}::bigint[], ${keys.map((k) => k.turnIndex)}::int[])
      with ordinality as u (tenant_id, outcome_id, call_id, turn_index, ord)
    join lateral (
      (select * from turns t where u.outcome_id is not null and t.tenant_id = u.tenant_id
        and t.outcome_id = u.outcome_id and t.turn_index = u.turn_index)
      union all
      (select * from turns t where u.outcome_id is null and t.call_id = u.call_id and t.turn_index = u.turn_index
        and t.tenant_id = u.tenant_id)
      limit 1
    ) t on true`

/** Which of `callIds` are calls of this run of this tenant. */
export const callsOfRun = async (sql: Sql, tenantId: number, runId: number, callIds: readonly number[]) =>
  (
    await sql<Array<{ id: number }>>`
      select id from calls where tenant_id = ${tenantId} and run_id = ${runId} and id = any(${callIds}::bigint[])`
  ).map((r) => r.id)

/** A data-subject erase (src/dsr/): the turns of the contact's calls or targets. */
export const contactTurnIds = async (
  tx: Tx,
  tenantId: number,
  callIds: readonly number[],
  targetIds: readonly number[],
): Promise<number[]> =>
  (
    await tx<{ id: number }[]>`
    select id from turns where tenant_id = ${tenantId} and (call_id = any(${tx.array([...callIds])}::bigint[])
      or target_id = any(${tx.array([...targetIds])}::bigint[]))`
  ).map((r) => r.id)

/** A data-subject erase (src/dsr/): the contact's turns go; the rows deleted. */
export const deleteTurns = async (tx: Tx, turnIds: readonly number[]): Promise<number> =>
  (await tx`delete from turns where id = any(${tx.array([...turnIds])}::bigint[])`).count
