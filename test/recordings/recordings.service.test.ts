// Call recordings through their service, on each store (Postgres chunks; S3 on test/support/fake-s3.ts):
// a save keeps the track until the workspace's retention runs out and replaces an earlier one (whose
// bytes go); a call of another workspace, or one erased, keeps nothing; the sweep deletes expired
// recordings with their bytes and nothing else; an erase deletes rows in its transaction and S3
// objects only after it commits (a failed delete is retried, a rolled-back erase leaves all). And the
// workspace's retention over GET/PATCH /api/workspace: owners and admins, 1–3650 days, audited.
import { randomBytes } from "node:crypto"
import { pino } from "pino"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { connectPostgres, type Sql, type Tx } from "../../src/platform/Db.js"
import { PgRecordingStore } from "../../src/recordings/pg-recording-store.js"
import { RecordingStoreError } from "../../src/recordings/recording-store.js"
import {
  deleteCallRecordings,
  makeRecordings,
  type RecordingRow,
  type RecordingsService,
} from "../../src/recordings/recordings.service.js"
import { S3RecordingStore } from "../../src/recordings/s3-recording-store.js"
import { api, type Session } from "../support/clients.js"
import { type FakeS3, startFakeS3 } from "../support/fake-s3.js"
import { realServices, sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let s3: FakeS3
const log = pino({ level: "silent" })

beforeAll(async () => {
  srv = await sharedTestServer()
  s3 = await startFakeS3()
})
afterAll(async () => {
  await s3?.close()
  await srv?.stop()
})
beforeEach(() => s3.reset())

/** A workspace of its own with a run to one target; each newCall() is another attempt at it. */
async function workspace(sql: Sql, tenantId?: number) {
  const [t] =
    tenantId === undefined
      ? await sql<[{ id: number }]>`
          insert into tenants (name, country, currency) values ('recordings', 'US', 'USD') returning id`
      : [{ id: tenantId }]
  const [w] = await sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt) values (${t!.id}, 'rec', 'priya', 'r') returning id`
  const [run] = await sql<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, status) values (${t!.id}, ${w.id}, 'completed') returning id`
  const [target] = await sql<[{ id: number }]>`
    insert into audience_targets (tenant_id, workflow_id, phone_e164) values (${t!.id}, ${w.id}, '+12025550148')
    returning id`
  const [rt] = await sql<[{ id: number }]>`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
    values (${t!.id}, ${run.id}, ${target.id}, '+12025550148', 'done') returning id`
  let attempt = 0
  return {
    tenantId: t!.id,
    newCall: async () => {
      const [call] = await sql<[{ id: number }]>`
        insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
          owner_instance, status)
        values (${t!.id}, ${run.id}, ${w.id}, ${rt.id}, ${target.id}, ${++attempt}, '+12025550148', 'sim', 'test',
          'ended')
        returning id`
      return call.id
    },
  }
}

async function readAll(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = []
  for await (const c of it) parts.push(c)
  return Buffer.concat(parts)
}

const DAY_MS = 86_400_000

interface Case {
  readonly name: "pg" | "s3"
  service(): RecordingsService
  /** Whether the recording's bytes are still stored (pg: as `db` sees it). */
  stored(row: RecordingRow, db?: Sql | Tx): Promise<boolean>
}

const cases: Case[] = [
  {
    name: "pg",
    service: () => makeRecordings({ sql: srv.sql, log, store: new PgRecordingStore(srv.sql) }),
    stored: async (row, db = srv.sql) => {
      const [r] = await db<[{ n: number }]>`
        select count(*)::int as n from recording_chunks where recording_id = ${row.id}`
      return r.n > 0
    },
  },
  {
    name: "s3",
    service: () =>
      makeRecordings({ sql: srv.sql, log, store: new S3RecordingStore({ ...s3.settings, timeoutMs: 1_000 }) }),
    stored: async (row) => s3.object(row.object_key) !== undefined,
  },
]

const rowOf = async (id: number) =>
  (await srv.sql<[RecordingRow?]>`select * from recordings where id = ${id}`)[0] ?? undefined

describe.each(cases)("recordings on the $name store", (c) => {
  let rec: RecordingsService
  let a: Awaited<ReturnType<typeof workspace>>
  let b: Awaited<ReturnType<typeof workspace>>
  beforeAll(async () => {
    rec = c.service()
    a = await workspace(srv.sql)
    b = await workspace(srv.sql)
  })

  it("saves a track for the workspace's retention and reads it back, whole and by range", async () => {
    const callId = await a.newCall()
    const bytes = randomBytes(600 * 1024)
    const row = await rec.saveRecording({ tenantId: a.tenantId, callId, track: "mixed", bytes, durationMs: 61_250 })
    expect(row).toMatchObject({
      tenant_id: a.tenantId,
      call_id: callId,
      track: "mixed",
      store: c.name,
      content_type: "audio/ogg",
      bytes: bytes.byteLength,
      duration_ms: 61_250,
    })
    expect(row!.object_key).toMatch(
      c.name === "pg" ? new RegExp(`^${row!.id}$`) : new RegExp(`^t${a.tenantId}/c${callId}/mixed-[0-9a-f]{16}\\.ogg$`),
    )
    expect(row!.expires_at.getTime() - row!.created_at.getTime()).toBe(90 * DAY_MS)
    const found = await rec.recordingOf(a.tenantId, callId, "mixed")
    expect(found).toEqual(row)
    expect((await readAll(rec.readRecording(found!))).equals(bytes)).toBe(true)
    const part = await readAll(rec.readRecording(found!, { start: 262_000, end: 263_000 }))
    expect(part.equals(bytes.subarray(262_000, 263_001))).toBe(true)
    expect(await rec.recordingOf(a.tenantId, callId, "sides")).toBeUndefined()
  })

  it("replaces a call's track saved again, and the earlier bytes go", async () => {
    const callId = await a.newCall()
    const first = await rec.saveRecording({
      tenantId: a.tenantId,
      callId,
      track: "sides",
      bytes: randomBytes(1000),
      durationMs: 1000,
    })
    const again = randomBytes(2000)
    const second = await rec.saveRecording({
      tenantId: a.tenantId,
      callId,
      track: "sides",
      bytes: again,
      durationMs: 2000,
    })
    expect(second!.id).not.toBe(first!.id)
    expect(await rowOf(first!.id)).toBeUndefined()
    expect(await c.stored(first!)).toBe(false)
    const now = await rec.recordingOf(a.tenantId, callId, "sides")
    expect(now).toMatchObject({ id: second!.id, bytes: 2000, duration_ms: 2000 })
    expect((await readAll(rec.readRecording(now!))).equals(again)).toBe(true)
  })

  it("keeps both tracks of a finished call", async () => {
    const callId = await a.newCall()
    const parts = { mixed: randomBytes(300), sides: randomBytes(500), durationMs: 4000 }
    await rec.saveCallRecording({ tenantId: a.tenantId, callId, parts })
    expect((await rec.recordingsOf(a.tenantId, [callId])).map((r) => [r.track, r.bytes])).toEqual([
      ["mixed", 300],
      ["sides", 500],
    ])
  })

  it("is the workspace's own: another workspace's call has none, and saving to it keeps nothing", async () => {
    const callId = await a.newCall()
    await rec.saveRecording({ tenantId: a.tenantId, callId, track: "mixed", bytes: randomBytes(10), durationMs: 5 })
    expect(await rec.recordingOf(b.tenantId, callId, "mixed")).toBeUndefined()
    expect(await rec.recordingsOf(b.tenantId, [callId])).toEqual([])
    const objects = s3.keys().length
    const foreign = await rec.saveRecording({
      tenantId: b.tenantId,
      callId,
      track: "sides",
      bytes: randomBytes(10),
      durationMs: 5,
    })
    expect(foreign).toBeUndefined()
    expect(await rec.recordingOf(a.tenantId, callId, "sides")).toBeUndefined()
    expect(s3.keys().length).toBe(objects)
  })

  it("keeps nothing for a call erased meanwhile", async () => {
    const callId = await a.newCall()
    await srv.sql`update calls set phone_e164 = 'erased:0123abcd' where id = ${callId}`
    const objects = s3.keys().length
    expect(
      await rec.saveRecording({ tenantId: a.tenantId, callId, track: "mixed", bytes: randomBytes(10), durationMs: 5 }),
    ).toBeUndefined()
    expect(await rec.recordingOf(a.tenantId, callId, "mixed")).toBeUndefined()
    expect(s3.keys().length).toBe(objects)
  })

  it("dates recordings by the workspace's retention, and re-dates them when it changes", async () => {
    const w = await workspace(srv.sql)
    expect(await rec.retentionDays(w.tenantId)).toBe(90)
    const before = await rec.saveRecording({
      tenantId: w.tenantId,
      callId: await w.newCall(),
      track: "mixed",
      bytes: randomBytes(10),
      durationMs: 5,
    })
    expect(await rec.setRetentionDays(w.tenantId, 7)).toEqual({ before: 90, after: 7 })
    expect(await rec.retentionDays(w.tenantId)).toBe(7)
    const after = await rec.saveRecording({
      tenantId: w.tenantId,
      callId: await w.newCall(),
      track: "mixed",
      bytes: randomBytes(10),
      durationMs: 5,
    })
    expect(after!.expires_at.getTime() - after!.created_at.getTime()).toBe(7 * DAY_MS)
    const redated = await rowOf(before!.id)
    expect(redated!.expires_at.getTime() - redated!.created_at.getTime()).toBe(7 * DAY_MS)
    await expect(rec.setRetentionDays(w.tenantId, 0)).rejects.toThrow(RangeError)
    await expect(rec.setRetentionDays(w.tenantId, 3651)).rejects.toThrow(RangeError)
  })

  it("sweeps expired recordings with their bytes, and nothing else", async () => {
    const w = await workspace(srv.sql)
    const rows: RecordingRow[] = []
    for (let i = 0; i < 5; i++) {
      const callId = await w.newCall()
      for (const track of ["mixed", "sides"] as const)
        rows.push(
          (await rec.saveRecording({ tenantId: w.tenantId, callId, track, bytes: randomBytes(50), durationMs: 5 }))!,
        )
    }
    // Seven of them expired long ago: before the sweep's clock, which no other recording is.
    const expired = rows.slice(0, 7)
    await srv.sql`
      update recordings set expires_at = '2000-01-01T00:00:00Z'
      where id = any(${srv.sql.array(expired.map((r) => r.id))}::bigint[])`
    const asOf = new Date("2000-06-01T00:00:00Z")
    expect(await rec.sweepExpiredRecordings({ limit: 3, asOf })).toBe(3)
    expect(await rec.sweepExpiredRecordings({ limit: 100, asOf })).toBe(4)
    expect(await rec.sweepExpiredRecordings({ asOf })).toBe(0)
    for (const r of expired) {
      expect(await rowOf(r.id)).toBeUndefined()
      expect(await c.stored(r)).toBe(false)
    }
    for (const r of rows.slice(7)) {
      expect(await rowOf(r.id)).toBeDefined()
      expect(await c.stored(r)).toBe(true)
    }
  })

  it("erases a contact's calls' recordings in the erase's transaction; S3 objects only once it commits", async () => {
    const w = await workspace(srv.sql)
    const [one, two, kept] = [await w.newCall(), await w.newCall(), await w.newCall()]
    const save = (callId: number, track: "mixed" | "sides") =>
      rec.saveRecording({ tenantId: w.tenantId, callId, track, bytes: randomBytes(100), durationMs: 5 })
    const rows = [await save(one, "mixed"), await save(one, "sides"), await save(two, "mixed")] as RecordingRow[]
    const other = (await save(kept, "mixed"))!

    // Rolled back: every row and object is still there.
    await srv.sql
      .begin(async (tx) => {
        expect(await deleteCallRecordings(tx, w.tenantId, [one, two])).toBe(3)
        throw new Error("the erase failed later")
      })
      .catch(() => {})
    for (const r of rows) expect([!!(await rowOf(r.id)), await c.stored(r)]).toEqual([true, true])

    // Another workspace's erase of these call ids deletes nothing.
    expect(await deleteCallRecordings(srv.sql, b.tenantId, [one, two])).toBe(0)

    const erased = await srv.sql.begin(async (tx) => {
      const n = await deleteCallRecordings(tx, w.tenantId, [one, two])
      // In the transaction, the objects are still in the bucket: nothing is deleted before the commit.
      // (On the embedded database the transaction holds its one connection: asked through `tx`.)
      for (const r of rows) expect(await c.stored(r, tx)).toBe(c.name === "s3")
      return n
    })
    expect(erased).toBe(3)
    for (const r of rows) expect(await rowOf(r.id)).toBeUndefined()
    if (c.name === "s3") {
      // A failed delete (each of the three objects refused three times) keeps the object queued, never a
      // row pointing at nothing; a later purge ends it.
      s3.fail(9, { status: 503 })
      expect(await rec.purgeDeletedObjects()).toEqual({ deleted: 0, failed: 3 })
      for (const r of rows) expect(await c.stored(r)).toBe(true)
      const [queued] = await srv.sql<[{ attempts: number; last_error: string }]>`
        select attempts, last_error from recording_deletions where object_key = ${rows[0]!.object_key}`
      expect(queued).toMatchObject({ attempts: 1, last_error: expect.stringContaining("503") })
      await srv.sql`update recording_deletions set next_attempt_at = now()
        where object_key = any(${srv.sql.array(rows.map((r) => r.object_key))}::text[])`
      expect((await rec.purgeDeletedObjects()).deleted).toBeGreaterThanOrEqual(3)
      const [left] = await srv.sql<[{ n: number }]>`
        select count(*)::int as n from recording_deletions
        where object_key = any(${srv.sql.array(rows.map((r) => r.object_key))}::text[])`
      expect(left.n).toBe(0)
    }
    for (const r of rows) expect(await c.stored(r)).toBe(false)
    expect([!!(await rowOf(other.id)), await c.stored(other)]).toEqual([true, true])
  })
})

// Two connections racing: only real Postgres has them (the embedded database serves one at a time).
describe.runIf(realServices).each(cases)("a save racing an erase on the $name store", (c) => {
  it("waits for the erase holding the call, then keeps nothing", async () => {
    const rec = c.service()
    const w = await workspace(srv.sql)
    const callId = await w.newCall()
    const eraser = connectPostgres(srv.config.databaseUrl!, 1)
    try {
      let commit!: () => void
      const go = new Promise<void>((resolve) => (commit = resolve))
      let locked!: () => void
      const held = new Promise<void>((resolve) => (locked = resolve))
      const erase = eraser.begin(async (tx) => {
        const n = await deleteCallRecordings(tx, w.tenantId, [callId])
        await tx`update calls set phone_e164 = 'erased:feedface' where id = ${callId}`
        locked()
        await go
        return n
      })
      await held
      let settled = false
      const save = rec
        .saveRecording({ tenantId: w.tenantId, callId, track: "mixed", bytes: randomBytes(10), durationMs: 5 })
        .finally(() => (settled = true))
      await new Promise((r) => setTimeout(r, 300))
      expect(settled).toBe(false) // held by the erase's lock on the call
      commit()
      expect(await erase).toBe(0)
      expect(await save).toBeUndefined()
      expect(await rec.recordingOf(w.tenantId, callId, "mixed")).toBeUndefined()
      expect(s3.keys().filter((k) => k.startsWith(`t${w.tenantId}/`))).toEqual([])
    } finally {
      await eraser.end({ timeout: 5 })
    }
  })
})

describe("saving to S3", () => {
  it("keeps no row when the object could not be put", async () => {
    const w = await workspace(srv.sql)
    const rec = makeRecordings({ sql: srv.sql, log, store: new S3RecordingStore({ ...s3.settings, timeoutMs: 1_000 }) })
    const callId = await w.newCall()
    s3.fail(3, { status: 503 })
    await expect(
      rec.saveRecording({ tenantId: w.tenantId, callId, track: "mixed", bytes: randomBytes(10), durationMs: 5 }),
    ).rejects.toBeInstanceOf(RecordingStoreError)
    expect(await rec.recordingOf(w.tenantId, callId, "mixed")).toBeUndefined()
  })
})

describe("the workspace's recording retention over the API", () => {
  let owner: Session
  let call: (
    s: Session | string,
    method: string,
    path: string,
    body?: unknown,
  ) => Promise<{ status: number; body: Json }>
  beforeAll(async () => {
    const a = api(srv)
    owner = await a.signup()
    call = async (s, method, path, body) => {
      const res = await a.call(method, path, {
        token: typeof s === "string" ? s : s.token,
        ...(body !== undefined && { body }),
      })
      return { status: res.status, body: (await res.json()) as Json }
    }
  })

  it("shows it, lets owners and admins set it (1–3650 days, audited), and no one else", async () => {
    const a = api(srv)
    expect((await call(owner, "GET", "/api/workspace")).body).toMatchObject({
      id: owner.tenantId,
      recording_retention_days: 90,
    })
    const set = await call(owner, "PATCH", "/api/workspace", { recording_retention_days: 30 })
    expect(set).toMatchObject({ status: 200, body: { id: owner.tenantId, recording_retention_days: 30 } })
    const name = set.body.name as string
    const admin = await a.addMember(owner, "admin")
    const both = await call(admin, "PATCH", "/api/workspace", { name: "Kept Calls", recording_retention_days: 3650 })
    expect(both).toMatchObject({ status: 200, body: { name: "Kept Calls", recording_retention_days: 3650 } })
    expect((await call(admin, "GET", "/api/workspace")).body.recording_retention_days).toBe(3650)

    const analyst = await a.addMember(owner, "analyst")
    expect((await call(analyst, "GET", "/api/workspace")).body.recording_retention_days).toBe(3650)
    const refused = await call(analyst, "PATCH", "/api/workspace", { recording_retention_days: 1 })
    expect(refused).toMatchObject({ status: 403, body: { code: "INSUFFICIENT_ROLE" } })
    const writeKey = (await a.createKey(owner, { name: "w", scope: "write" })).secret
    expect((await call(writeKey, "PATCH", "/api/workspace", { recording_retention_days: 1 })).status).toBe(403)

    for (const bad of [0, 3651, 1.5, "30", null]) {
      const r = await call(owner, "PATCH", "/api/workspace", { recording_retention_days: bad })
      expect(r, JSON.stringify(bad)).toMatchObject({ status: 422, body: { code: "VALIDATION_FAILED" } })
      expect(r.body.errors[0].field).toBe("recording_retention_days")
    }
    expect((await call(owner, "PATCH", "/api/workspace", {})).status).toBe(422)
    expect((await call(owner, "GET", "/api/workspace")).body.recording_retention_days).toBe(3650)

    const log = (await call(owner, "GET", "/audit?action=workspace.recording_retention_changed")).body.events
    expect(log).toMatchObject([
      {
        actor: `user:${admin.userId}`,
        before: { recording_retention_days: 30 },
        after: { recording_retention_days: 3650 },
      },
      {
        actor: `user:${owner.userId}`,
        before: { recording_retention_days: 90 },
        after: { recording_retention_days: 30 },
      },
    ])
    expect(name).toBeTruthy()
  })
})
