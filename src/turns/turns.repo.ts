// SQL for reading turns (stream history, live calls), storing turns that external orchestrators
// send through POST /internal/turns, and storing the runtime's own turns in batches (seqs reserved
// in blocks from the run's turn_seq, src/runs/runs.repo.ts).
import type { Sql } from "../platform/Db.js"
import { nextTurnSeq } from "../runs/runs.repo.js"
import type { TurnMessage } from "./turn.message.js"

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
export const turnsAfter = (sql: Sql, runId: number, sinceSeq: number, targetId: number | undefined, limit: number) =>
  sql<TurnMessage[]>`
    select id as turn_id, seq, run_id, target_id, call_id, turn_index, speaker, text, to_char(at at time zone 'UTC',
      'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, outcome_id
    from turns
    where run_id = ${runId} and seq > ${sinceSeq} ${targetId === undefined ? sql`` : sql`and target_id = ${targetId}`}
    order by seq
    limit ${limit}`

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
}

export const liveCalls = (sql: Sql, tenantId: number, runId: number | undefined, limit: number) =>
  sql<LiveCallRow[]>`
    select c.id as call_id, c.run_id, c.workflow_id, c.target_id, c.phone_e164, c.status, c.attempt, c.started_at,
      c.answered_at,
           (select count(*)::int from turns t where t.call_id = c.id) as turns,
           (select max(t.seq) from turns t where t.call_id = c.id) as last_seq
    from calls c
    where c.tenant_id = ${tenantId} and c.status <> 'ended'
      ${runId === undefined ? sql`` : sql`and c.run_id = ${runId}`}
    order by c.started_at desc, c.id desc
    limit ${limit}`

export interface IngestedTurn {
  readonly tenantId: number
  readonly runId: number
  readonly targetId: number
  readonly callId: number | null
  readonly turnIndex: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly outcomeId: string | null
  readonly at: Date
}

/**
 * Stores one ingested turn with the run's next seq, in one statement; a turn already stored under
 * the same (outcome_id, turn index) is returned as it was, with `created` false.
 */
export const storeIngestedTurn = async (sql: Sql, t: IngestedTurn): Promise<{ turn: TurnMessage; created: boolean }> =>
  (await sql.begin(async (tx) => {
    if (t.outcomeId !== null) {
      const [existing] = await tx<[TurnMessage?]>`
        select id as turn_id, seq, run_id, target_id, call_id, turn_index, speaker, text, to_char(at at time zone 'UTC',
          'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, outcome_id
        from turns where tenant_id = ${t.tenantId} and outcome_id = ${t.outcomeId} and turn_index = ${t.turnIndex}`
      if (existing) return { turn: existing, created: false }
    }
    const seq = await nextTurnSeq(tx, t.runId)
    const [row] = await tx<[TurnMessage?]>`
      insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, outcome_id, at)
      values (${t.tenantId}, ${t.runId}, ${t.targetId}, ${t.callId}, ${seq}, ${t.turnIndex}, ${t.speaker}, ${t.text},
        ${t.outcomeId}, ${t.at})
      on conflict do nothing
      returning id as turn_id, seq, run_id, target_id, call_id, turn_index, speaker, text,
        to_char(at at time zone 'UTC',
        'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, outcome_id`
    if (row) return { turn: row, created: true }
    // A concurrent request with the same key won: answer with its turn.
    const [won] = await tx<[TurnMessage]>`
      select id as turn_id, seq, run_id, target_id, call_id, turn_index, speaker, text, to_char(at at time zone 'UTC',
        'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, outcome_id
      from turns where tenant_id = ${t.tenantId} and outcome_id = ${t.outcomeId} and turn_index = ${t.turnIndex}`
    return { turn: won, created: false }
  })) as { turn: TurnMessage; created: boolean }

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

/** Stores turns (one statement); returns the id of each stored, by run and seq (a conflicting one is skipped). */
export const insertTurns = (sql: Sql, rows: TurnRow[]) =>
  sql<Array<{ id: number; run_id: number; seq: number }>>`
    insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
    select * from unnest(
      ${rows.map((r) => r.tenant_id)}::bigint[], ${rows.map((r) => r.run_id)}::bigint[],
        ${rows.map((r) => r.target_id)}::bigint[],
      ${rows.map((r) => r.call_id)}::bigint[], ${rows.map((r) => r.seq)}::bigint[],
        ${rows.map((r) => r.turn_index)}::int[],
      ${rows.map((r) => r.speaker)}::text[], ${rows.map((r) => r.text)}::text[],
        ${rows.map((r) => r.at.toISOString())}::timestamptz[])
    on conflict do nothing
    returning id, run_id, seq`
