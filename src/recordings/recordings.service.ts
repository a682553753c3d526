// Call recordings: kept at a call's end (two Ogg Opus tracks) in the deployment's store, read back by
// range, deleted by an erase, a replacement or the retention sweep, which the workspace sets.
//
// Keys. A pg recording's bytes are its row's chunks, keyed by the row id (object_key = the id as
// text). An S3 recording's object is t<tenant>/c<call>/<track>-<16 hex random>.ogg: a new key for
// every save, so replacing a recording, or an object's deletion retried late, never touches the
// object a live row points at, and an object whose row is gone is never pointed at again.
//
// Order. pg: the row and its chunks are written and deleted in one transaction. S3: the object is
// put before its row is inserted, and deleted only after its row's deletion commits (queued in
// recording_deletions by that same transaction, removed once S3 has deleted it, retried by the
// sweep); so a row never points at nothing, and a failed delete leaves only an unreferenced object.
import { randomBytes } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import type { Logger } from "pino"
import { type AuditActor, recordAudit } from "../audit/audit.repo.js"
import { AppConfig } from "../platform/AppConfig.js"
import type { Config } from "../platform/config.js"
import { Db, type Sql } from "../platform/Db.js"
import { Log } from "../platform/Log.js"
import { recordingRetentionDays, setRecordingRetentionDays } from "../workspaces/workspaces.repo.js"
import { PgRecordingStore } from "./pg-recording-store.js"
import { type ByteRange, type RecordingStore, RecordingStoreError } from "./recording-store.js"
import {
  deleteExpired,
  deletionDone,
  deletionFailed,
  findRecording,
  holdCallForSave,
  insertRecording,
  type QueuedDeletion,
  queueDeletion,
  type RecordingCue,
  type RecordingRow,
  recordingsOfCalls,
  redateRecordings,
  removeTrack,
  type StoreKind,
  TRACKS,
  type Track,
  takeDeletions,
} from "./recordings.repo.js"
import { S3RecordingStore } from "./s3-recording-store.js"

export { deleteCallRecordings, type RecordingRow, TRACKS, type Track } from "./recordings.repo.js"

/** What a recording's bytes are: Ogg Opus. */
export const RECORDING_CONTENT_TYPE = "audio/ogg"
/** The retention a workspace may set, in days. */
export const RETENTION_DAYS = { min: 1, max: 3650 } as const
/** Expired recordings deleted per statement by the sweep. */
const SWEEP_BATCH = 100
/** S3 deletions in flight at once. */
const DELETE_CONCURRENCY = 4

/** The S3 key of a new recording (see the header). */
export const s3KeyOf = (tenantId: number, callId: number, track: Track): string =>
  `t${tenantId}/c${callId}/${track}-${randomBytes(8).toString("hex")}.ogg`

/** The deployment's store for new recordings (RECORDING_STORE). */
export function recordingStoreFor(config: Pick<Config, "recordingStore" | "s3">, sql: Sql): RecordingStore {
  if (config.recordingStore === "pg") return new PgRecordingStore(sql)
  if (config.s3 === undefined) throw new Error("RECORDING_STORE=s3 without its S3_* settings")
  return new S3RecordingStore(config.s3)
}

export interface NewRecording {
  readonly tenantId: number
  readonly callId: number
  readonly track: Track
  /** The Ogg Opus file. */
  readonly bytes: Uint8Array
  readonly durationMs: number
  /** Where each turn began in it. */
  readonly cues?: ReadonlyArray<RecordingCue>
}

export interface RecordingsService {
  /** Where new recordings go. */
  readonly store: RecordingStore
  /**
   * Keeps the track of the call, replacing one it had, until the workspace's retention runs out. The
   * row; undefined when the call is not the workspace's or was erased meanwhile (nothing is kept).
   * Rejects (RecordingStoreError, or a database error) when it could not be kept.
   */
  saveRecording(r: NewRecording): Promise<RecordingRow | undefined>
  /** Both tracks of a finished call (what runtime/voice/call-recorder.ts hands over). */
  saveCallRecording(r: {
    readonly tenantId: number
    readonly callId: number
    readonly parts: { readonly mixed: Uint8Array; readonly sides: Uint8Array; readonly durationMs: number }
    readonly cues?: ReadonlyArray<RecordingCue>
  }): Promise<void>
  /** The workspace's recording of the call's track; undefined for none or another workspace's call. */
  recordingOf(tenantId: number, callId: number, track: Track): Promise<RecordingRow | undefined>
  /** The workspace's recordings of these calls (a data-subject export). */
  recordingsOf(tenantId: number, callIds: readonly number[]): Promise<RecordingRow[]>
  /** The recording's bytes, or bytes [start, end] of it, a chunk at a time. */
  readRecording(row: RecordingRow, range?: ByteRange): AsyncIterable<Uint8Array>
  /**
   * Deletes the S3 objects whose rows are gone (queued by an erase, a replacement or the sweep); call it
   * after the transaction that queued them commits (the sweep does too). A failure is logged and retried.
   */
  purgeDeletedObjects(o?: { readonly limit?: number }): Promise<{ deleted: number; failed: number }>
  /**
   * Deletes up to `limit` (default 1000) recordings expired by `asOf` (default now) in batches, then
   * their objects; how many recordings were deleted.
   */
  sweepExpiredRecordings(o?: { readonly limit?: number; readonly asOf?: Date }): Promise<number>
  /** How many days the workspace keeps its recordings. */
  retentionDays(tenantId: number): Promise<number>
  /** Sets it (every recording the workspace has is re-dated to it); the days before and after. */
  setRetentionDays(tenantId: number, days: number): Promise<{ before: number; after: number }>
}

export function makeRecordings(d: {
  readonly sql: Sql
  readonly store: RecordingStore
  readonly log: Logger
}): RecordingsService {
  const { sql, log } = d
  const pg = d.store instanceof PgRecordingStore ? d.store : new PgRecordingStore(sql)
  const s3 = d.store.kind === "s3" ? d.store : undefined

  const storeOf = (kind: StoreKind, op: "read" | "delete", key: string): RecordingStore => {
    if (kind === "pg") return pg
    if (s3 !== undefined) return s3
    throw new RecordingStoreError("s3", op, key, "refused", "RECORDING_STORE is not s3 in this deployment")
  }

  /** Deletes the queued objects taken; each entry goes once its object is gone. */
  async function purge(o: { readonly limit: number; readonly ids?: readonly number[] }) {
    if (s3 === undefined || o.ids?.length === 0) return { deleted: 0, failed: 0, taken: 0 }
    const taken = await takeDeletions(sql, o)
    let deleted = 0
    let failed = 0
    const next = [...taken]
    const worker = async () => {
      for (let q = next.shift(); q !== undefined; q = next.shift()) {
        try {
          await s3.delete(q.object_key)
          await deletionDone(sql, q.id)
          deleted++
        } catch (err) {
          failed++
          const message = err instanceof Error ? err.message : String(err)
          log.warn({ key: q.object_key, error: message }, "a recording's object could not be deleted (retried later)")
          await deletionFailed(sql, q.id, message).catch(() => {}) // only a note for an operator
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, taken.length) }, worker))
    return { deleted, failed, taken: taken.length }
  }

  /** After a commit that queued deletions: their objects go now (the sweep retries a failure). */
  const purgeQueued = async (queued: readonly QueuedDeletion[]) => {
    if (queued.length === 0) return
    await purge({ limit: queued.length, ids: queued.map((q) => q.id) }).catch((err: unknown) =>
      log.warn({ err }, "queued recording objects not deleted yet (the sweep retries)"),
    )
  }

  /** An object put for a save that did not keep it: queued and deleted, or at least named in the log. */
  const discard = async (key: string) => {
    try {
      await purgeQueued([await queueDeletion(sql, "s3", key)])
    } catch (err) {
      await s3
        ?.delete(key)
        .catch(() => log.error({ err, key }, "a recording's object is left in the bucket with no row"))
    }
  }

  async function saveRecording(r: NewRecording): Promise<RecordingRow | undefined> {
    if (!TRACKS.includes(r.track)) throw new RangeError(`no recording track ${String(r.track)}`)
    if (!Number.isSafeInteger(r.durationMs) || r.durationMs < 0) throw new RangeError(`bad duration ${r.durationMs}`)
    const fields = {
      tenantId: r.tenantId,
      callId: r.callId,
      track: r.track,
      contentType: RECORDING_CONTENT_TYPE,
      bytes: r.bytes.byteLength,
      durationMs: r.durationMs,
      cues: r.cues ?? [],
    }
    if (s3 === undefined) {
      const saved = await sql.begin(async (tx) => {
        if ((await holdCallForSave(tx, r.tenantId, r.callId)) !== "ok") return undefined
        const queued = await removeTrack(tx, r.callId, r.track)
        const row = await insertRecording(tx, { ...fields, store: "pg", objectKey: undefined })
        await pg.putIn(tx, row.object_key, r.bytes)
        return { row, queued }
      })
      await purgeQueued(saved?.queued ?? [])
      return saved?.row
    }
    // Nothing goes to the bucket for a call that is not the workspace's, or is erased.
    if ((await sql.begin((tx) => holdCallForSave(tx, r.tenantId, r.callId))) !== "ok") return undefined
    const key = s3KeyOf(r.tenantId, r.callId, r.track)
    await s3.put(key, r.bytes, RECORDING_CONTENT_TYPE)
    let saved: { row: RecordingRow; queued: QueuedDeletion[] } | undefined
    try {
      saved = await sql.begin(async (tx) => {
        if ((await holdCallForSave(tx, r.tenantId, r.callId)) !== "ok") return undefined
        const queued = await removeTrack(tx, r.callId, r.track)
        return { row: await insertRecording(tx, { ...fields, store: "s3", objectKey: key }), queued }
      })
    } catch (err) {
      await discard(key)
      throw err
    }
    if (saved === undefined) {
      await discard(key)
      return undefined
    }
    await purgeQueued(saved.queued)
    return saved.row
  }

  const service: RecordingsService = {
    store: d.store,
    saveRecording,
    saveCallRecording: async (r) => {
      const common = { tenantId: r.tenantId, callId: r.callId, durationMs: r.parts.durationMs, cues: r.cues ?? [] }
      await saveRecording({ ...common, track: "mixed", bytes: r.parts.mixed })
      await saveRecording({ ...common, track: "sides", bytes: r.parts.sides })
    },
    recordingOf: (tenantId, callId, track) => findRecording(sql, tenantId, callId, track),
    recordingsOf: (tenantId, callIds) => recordingsOfCalls(sql, tenantId, callIds),
    readRecording: (row, range) => storeOf(row.store, "read", row.object_key).read(row.object_key, range),
    purgeDeletedObjects: async (o = {}) => {
      const limit = o.limit ?? 1000
      let deleted = 0
      let failed = 0
      // Batches until nothing due is left (a failure is put off, so it is not taken again now).
      while (deleted + failed < limit) {
        const r = await purge({ limit: Math.min(100, limit - deleted - failed) })
        deleted += r.deleted
        failed += r.failed
        if (r.taken === 0) break
      }
      return { deleted, failed }
    },
    sweepExpiredRecordings: async (o = {}) => {
      const limit = o.limit ?? 1000
      let swept = 0
      while (swept < limit) {
        const batch = Math.min(SWEEP_BATCH, limit - swept)
        const n = await deleteExpired(sql, o.asOf, batch)
        swept += n
        if (n < batch) break
      }
      // Their objects, and any others due: until none is left or only failures come back.
      for (;;) {
        const r = await purge({ limit: 100 })
        if (r.taken === 0 || r.failed === r.taken) break
      }
      return swept
    },
    retentionDays: async (tenantId) => {
      const days = await recordingRetentionDays(sql, tenantId)
      if (days === undefined) throw new Error(`no workspace ${tenantId}`)
      return days
    },
    setRetentionDays: (tenantId, days) => setRetention(sql, tenantId, days),
  }
  return service
}

/** Sets the workspace's retention and re-dates its recordings, in one transaction (audited when `actor` is given). */
async function setRetention(
  sql: Sql,
  tenantId: number,
  days: number,
  actor?: AuditActor,
): Promise<{ before: number; after: number }> {
  if (!Number.isInteger(days) || days < RETENTION_DAYS.min || days > RETENTION_DAYS.max)
    throw new RangeError(`retention must be ${RETENTION_DAYS.min}–${RETENTION_DAYS.max} days, not ${days}`)
  return (await sql.begin(async (tx) => {
    const before = await setRecordingRetentionDays(tx, tenantId, days)
    if (before === undefined) throw new Error(`no workspace ${tenantId}`)
    if (before !== days) {
      await redateRecordings(tx, tenantId, days)
      if (actor !== undefined)
        await recordAudit(tx, actor, {
          action: "workspace.recording_retention_changed",
          target: `workspace:${tenantId}`,
          before: { recording_retention_days: before },
          after: { recording_retention_days: days },
        })
    }
    return { before, after: days }
  })) as { before: number; after: number }
}

/**
 * PATCH /api/workspace's recording_retention_days (owners and admins): the caller's workspace keeps its
 * recordings `days` from each one's making, those it has now included; the audit entry says before and after.
 */
export const setRecordingRetention = (actor: AuditActor, days: number) =>
  Effect.flatMap(Db, ({ sql }) => Effect.promise(() => setRetention(sql, actor.tenantId, days, actor)))

/** The recordings service of the deployment's database and store. */
export class Recordings extends Context.Tag("parley/Recordings")<Recordings, RecordingsService>() {}

export const RecordingsLive: Layer.Layer<Recordings, never, AppConfig | Db | Log> = Layer.effect(
  Recordings,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { sql } = yield* Db
    const log = yield* Log
    return makeRecordings({ sql, log, store: recordingStoreFor(config, sql) })
  }),
)
