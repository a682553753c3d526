// SQL of the public demo (migrations/0018): the demo workspace's marker, demo calls and their feed
// tokens, demo voices' tokens, and the reads a feed is made of. The rows a demo call runs on (its
// workflow, rule book, audience target, run and targets) are written by their own repositories.
import type { Sql, Tx } from "../platform/Db.js"

// --- the demo workspace ---------------------------------------------------------------------

export const findDemoWorkspace = async (sql: Sql | Tx): Promise<number | undefined> => {
  const [row] = await sql<[{ tenant_id: number }?]>`select tenant_id from demo_workspace`
  return row?.tenant_id
}

/** Serialises the creation of the demo workspace across processes (inside the creating transaction). */
export const lockDemoWorkspace = async (tx: Tx): Promise<void> => {
  await tx`select pg_advisory_xact_lock(hashtextextended('demo_workspace', 0))`
}

export const markDemoWorkspace = async (tx: Tx, tenantId: number): Promise<void> => {
  await tx`insert into demo_workspace (tenant_id) values (${tenantId})`
}

// --- demo calls -----------------------------------------------------------------------------

export interface DemoCallRow {
  readonly id: number
  readonly run_id: number
  readonly persona: string
  readonly created_at: Date
  readonly expires_at: Date
}

export const insertDemoCall = async (
  tx: Tx,
  c: { tokenSha256: Buffer; runId: number; persona: string; createdAt: Date; expiresAt: Date },
): Promise<number> => {
  const [row] = await tx<[{ id: number }]>`
    insert into demo_calls (feed_token_sha256, run_id, persona, created_at, expires_at)
    values (${c.tokenSha256}, ${c.runId}, ${c.persona}, ${c.createdAt}, ${c.expiresAt})
    returning id`
  return row.id
}

/** The demo call a feed token was minted for (expired or not: the service decides). */
export const findDemoCall = async (sql: Sql, tokenSha256: Buffer): Promise<DemoCallRow | undefined> => {
  const [row] = await sql<[DemoCallRow?]>`
    select id, run_id, persona, created_at, expires_at from demo_calls where feed_token_sha256 = ${tokenSha256}`
  return row
}

/** Where a demo call's run stands: its one target, its attempt (if dialled) and what ended it. */
export interface DemoProgress {
  readonly tenant_id: number
  readonly run_status: string
  /** The run's last reserved turn seq: every turn of the call has a seq at most this. */
  readonly turn_seq: number
  readonly run_target_id: number
  readonly target_id: number
  readonly target_status: "queued" | "waiting" | "dialing" | "done" | "skipped"
  readonly attempts: number
  readonly target_outcome: string | null
  readonly target_updated_at: Date
  readonly call_id: number | null
  readonly call_status: "dialing" | "connected" | "ended" | null
  readonly call_outcome: string | null
  readonly started_at: Date | null
  readonly answered_at: Date | null
  readonly ended_at: Date | null
  /** The turn count the runtime logged with the attempt's last decision (null until then). */
  readonly turns_logged: number | null
  /** Why the dialer last held the target (the calling window), if it did. */
  readonly hold_reason: string | null
}

export const demoProgress = async (sql: Sql, runId: number): Promise<DemoProgress | undefined> => {
  const [row] = await sql<[DemoProgress?]>`
    select r.tenant_id, r.status as run_status,
      coalesce((select q.last_seq from run_turn_seqs q where q.run_id = r.id), 0) as turn_seq,
      t.id as run_target_id, t.target_id,
      t.status as target_status, t.attempts, t.outcome as target_outcome, t.updated_at as target_updated_at,
      c.id as call_id, c.status as call_status, c.outcome as call_outcome, c.started_at, c.answered_at, c.ended_at,
      (select (d.detail ->> 'turns')::int from dial_decisions d
        where d.call_id = c.id and d.decision in ('stop', 'retry') order by d.id desc limit 1) as turns_logged,
      (select d.reason from dial_decisions d
        where d.run_id = r.id and d.target_id = t.target_id and d.decision = 'hold' order by d.id desc limit 1)
        as hold_reason
    from runs r
    join run_targets t on t.run_id = r.id
    left join calls c on c.id = t.last_call_id
    where r.id = ${runId}
    order by t.id
    limit 1`
  return row
}

export interface DemoTurn {
  readonly seq: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly at: Date
}

/** The call's transcript, in order (a demo call is two minutes: a few dozen turns at most). */
export const callTurns = (sql: Sql, runId: number, callId: number) =>
  sql<DemoTurn[]>`
    select seq, speaker, text, at from turns where run_id = ${runId} and call_id = ${callId} order by seq`

/** When the demo workspace last dialled a number (the cool-down's start). */
export const lastContactedAt = async (sql: Sql, tenantId: number, phone: string): Promise<Date | undefined> => {
  const [row] = await sql<[{ last_contacted_at: Date }?]>`
    select last_contacted_at from recent_contacts where tenant_id = ${tenantId} and phone_e164 = ${phone}`
  return row?.last_contacted_at
}

/**
 * Demo calls the dialer has not dialled and should not any more: held for a calling window (a
 * demo is now or never) or, created before `queuedBefore`, still waiting for a runtime process.
 * Only calls of the week before are looked at, so the sweep stays an index range scan.
 */
export const undialledDemoTargets = (sql: Sql, queuedBefore: Date, limit: number) =>
  sql<{ tenant_id: number; run_id: number; run_target_id: number; target_id: number; hold_reason: string | null }[]>`
    select t.tenant_id, t.run_id, t.id as run_target_id, t.target_id,
      (select d.reason from dial_decisions d
        where d.run_id = t.run_id and d.target_id = t.target_id and d.decision = 'hold' order by d.id desc limit 1)
        as hold_reason
    from demo_calls dc join run_targets t on t.run_id = dc.run_id
    where dc.created_at > ${new Date(queuedBefore.getTime() - 7 * 86_400_000)} and t.attempts = 0
      and (t.status = 'waiting' or (t.status = 'queued' and dc.created_at < ${queuedBefore}))
    order by dc.id
    limit ${limit}`

// --- demo voices ----------------------------------------------------------------------------

export const insertDemoVoice = async (sql: Sql, tokenSha256: Buffer, voiceAvatarId: number): Promise<void> => {
  await sql`insert into demo_voices (token_sha256, voice_avatar_id) values (${tokenSha256}, ${voiceAvatarId})`
}

/** The cloned voice a demo voice token names, if the demo minted it and it is still there. */
export const findDemoVoice = async (sql: Sql, tokenSha256: Buffer): Promise<number | undefined> => {
  const [row] = await sql<[{ voice_avatar_id: number }?]>`
    select voice_avatar_id from demo_voices where token_sha256 = ${tokenSha256}`
  return row?.voice_avatar_id
}
