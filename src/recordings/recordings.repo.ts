// SQL of the recordings rows and of recording_deletions (S3 objects whose rows are gone): the only
// file that writes them. A row is deleted in the transaction that decides so, with an S3 object's
// deletion queued beside it; the object itself goes after the commit (recordings.service.ts).
import type { Sql, Tx } from "../platform/Db.js"

export const TRACKS = ["mixed", "sides"] as const
/** `mixed`: mono, both sides summed (for listening); `sides`: stereo, the callee left and the agent right. */
export type Track = (typeof TRACKS)[number]
export type StoreKind = "pg" | "s3"

/** Where in a recording a turn began (ms of audio), and whose. */
export interface RecordingCue {
  readonly at_ms: number
  readonly speaker: "agent" | "callee"
}

export interface RecordingRow {
  readonly id: number
  readonly tenant_id: number
  readonly call_id: number
  readonly track: Track
  readonly store: StoreKind
  /** pg: the row's id as text; s3: the object's key in the bucket. */
  readonly object_key: string
  readonly content_type: string
  readonly bytes: number
  readonly duration_ms: number
  /** Where each turn began (migration 0054). */
  readonly cues: ReadonlyArray<RecordingCue>
  readonly created_at: Date
  readonly expires_at: Date
}

/** An S3 object queued for deletion. */
export interface QueuedDeletion {
  readonly id: number
  readonly object_key: string
}

/** Runs `f` in `db` when it is a transaction, else in one of its own. */
const inTransaction = <A>(db: Sql | Tx, f: (tx: Tx) => Promise<A>): Promise<A> =>
  "savepoint" in db ? f(db as Tx) : ((db as Sql).begin((tx) => f(tx)) as Promise<A>)

// --- saving -------------------------------------------------------------------------------------

/**
 * Holds the call (FOR SHARE) until `tx` ends, so an erase of it (deleteCallRecordings, which locks
 * the calls first) waits for this save and then deletes what it kept, or comes first and this save
 * finds the call erased. "missing" also when the call is another workspace's.
 */
export async function holdCallForSave(tx: Tx, tenantId: number, callId: number): Promise<"ok" | "missing" | "erased"> {
  const [call] = await tx<[{ phone_e164: string }?]>`
    select phone_e164 from calls where id = ${callId} and tenant_id = ${tenantId} for share`
  if (call === undefined) return "missing"
  // The marker an erase leaves instead of the number (src/erasure/contact-hash.ts, erasedMarker).
  return call.phone_e164.startsWith("erased:") ? "erased" : "ok"
}

/** Deletes the call's recording of `track` (its pg chunks with it), queuing an S3 object's deletion. */
export async function removeTrack(tx: Tx, callId: number, track: Track): Promise<QueuedDeletion[]> {
  return [
    ...(await tx<QueuedDeletion[]>`
    with gone as (delete from recordings where call_id = ${callId} and track = ${track} returning store, object_key)
    insert into recording_deletions (store, object_key)
    select store, object_key from gone where store = 's3'
    returning id, object_key`),
  ]
}

/**
 * A new row, kept for the workspace's retention from now. A pg row's object_key is its own id; an s3
 * row's is the key its object was put under.
 */
export async function insertRecording(
  tx: Tx,
  r: {
    readonly tenantId: number
    readonly callId: number
    readonly track: Track
    readonly store: StoreKind
    readonly objectKey: string | undefined
    readonly contentType: string
    readonly bytes: number
    readonly durationMs: number
    readonly cues?: ReadonlyArray<RecordingCue>
  },
): Promise<RecordingRow> {
  const [row] = await tx<[RecordingRow]>`
    with n as (select nextval(pg_get_serial_sequence('recordings', 'id')) as id)
    insert into recordings (id, tenant_id, call_id, track, store, object_key, content_type, bytes, duration_ms,
      cues, expires_at)
    select n.id, t.id, ${r.callId}, ${r.track}, ${r.store}, coalesce(${r.objectKey ?? null}::text, n.id::text),
      ${r.contentType}, ${r.bytes}, ${r.durationMs}, ${tx.json((r.cues ?? []) as never)},
      now() + make_interval(days => t.recording_retention_days)
    from n, tenants t where t.id = ${r.tenantId}
    returning *`
  return row
}

// --- reading ------------------------------------------------------------------------------------

/** The workspace's recording of the call's `track`; undefined for another workspace's call. */
export async function findRecording(
  sql: Sql | Tx,
  tenantId: number,
  callId: number,
  track: Track,
): Promise<RecordingRow | undefined> {
  const [row] = await sql<[RecordingRow?]>`
    select * from recordings where tenant_id = ${tenantId} and call_id = ${callId} and track = ${track}`
  return row
}

/** The workspace's recordings of these calls, by call and track. */
export const recordingsOfCalls = async (
  sql: Sql | Tx,
  tenantId: number,
  callIds: readonly number[],
): Promise<RecordingRow[]> => [
  ...(await sql<RecordingRow[]>`
    select * from recordings where tenant_id = ${tenantId} and call_id = any(${sql.array([...callIds])}::bigint[])
    order by call_id, track`),
]

// --- deleting -----------------------------------------------------------------------------------

/**
 * Deletes the workspace's recordings of these calls (a data-subject erase, in its transaction; in one
 * of its own when given the pool): the rows and pg chunks at once, S3 objects queued for deletion
 * after the commit. Locks the calls first, so a save in flight either ends before (and its row is
 * deleted here) or finds the call erased. How many recordings were deleted.
 */
export const deleteCallRecordings = (db: Sql | Tx, tenantId: number, callIds: readonly number[]): Promise<number> =>
  inTransaction(db, async (tx) => {
    if (callIds.length === 0) return 0
    const ids = tx.array([...callIds])
    await tx`
      select id from calls where id = any(${ids}::bigint[]) and tenant_id = ${tenantId} order by id for no key update`
    const [row] = await tx<[{ deleted: number }]>`
      with gone as (
        delete from recordings where tenant_id = ${tenantId} and call_id = any(${ids}::bigint[])
        returning store, object_key),
      queued as (
        insert into recording_deletions (store, object_key) select store, object_key from gone where store = 's3')
      select count(*)::int as deleted from gone`
    return row.deleted
  })

/** Deletes up to `limit` recordings expired by `asOf` (S3 objects queued); how many. */
export async function deleteExpired(sql: Sql | Tx, asOf: Date | undefined, limit: number): Promise<number> {
  const [row] = await sql<[{ deleted: number }]>`
    with doomed as (
      select id from recordings where expires_at <= coalesce(${asOf ?? null}::timestamptz, now())
      order by expires_at limit ${limit} for update skip locked),
    gone as (
      delete from recordings r using doomed where r.id = doomed.id returning r.store, r.object_key),
    queued as (
      insert into recording_deletions (store, object_key) select store, object_key from gone where store = 's3')
    select count(*)::int as deleted from gone`
  return row.deleted
}

/** Queues an object no row points at (a save that failed after its put). */
export async function queueDeletion(sql: Sql | Tx, store: "s3", objectKey: string): Promise<QueuedDeletion> {
  const [row] = await sql<[QueuedDeletion]>`
    insert into recording_deletions (store, object_key) values (${store}, ${objectKey}) returning id, object_key`
  return row
}

/**
 * Takes queued deletions that are due (or those of `ids`, due or not): each is put off by a backoff
 * that grows with its attempts (30 s doubling, at most an hour), which is also how long the taker
 * has before another process may take it again.
 */
export const takeDeletions = async (
  sql: Sql,
  o: { readonly limit: number; readonly ids?: readonly number[] },
): Promise<QueuedDeletion[]> => [
  ...(await sql<QueuedDeletion[]>`
    update recording_deletions d
    set attempts = d.attempts + 1,
      next_attempt_at = now() + least(interval '1 hour', interval '30 seconds' * power(2, least(d.attempts, 10)))
    where d.id in (
      select id from recording_deletions
      where ${o.ids === undefined ? sql`next_attempt_at <= now()` : sql`id = any(${sql.array([...o.ids])}::bigint[])`}
      order by next_attempt_at limit ${o.limit} for update skip locked)
    returning d.id, d.object_key`),
]

/** The object is gone: its entry goes too. */
export const deletionDone = async (sql: Sql, id: number): Promise<void> => {
  await sql`delete from recording_deletions where id = ${id}`
}

/** Why the last attempt failed (for an operator reading the table). */
export const deletionFailed = async (sql: Sql, id: number, error: string): Promise<void> => {
  await sql`update recording_deletions set last_error = ${error.slice(0, 500)} where id = ${id}`
}

// --- retention ----------------------------------------------------------------------------------

/** Re-dates the workspace's recordings to `days` after each was made (its retention changed). */
export const redateRecordings = async (tx: Tx, tenantId: number, days: number): Promise<number> =>
  (
    await tx`
    update recordings set expires_at = created_at + make_interval(days => ${days}) where tenant_id = ${tenantId}`
  ).count
