// The two recording stores behind one interface: Postgres chunks (on the suite's database, embedded
// or real) and S3 (against test/support/fake-s3.ts, which checks every request's Signature V4 with
// its own implementation). Both: put, read whole and by ranges across 256 KiB chunk borders, chunks
// rather than the whole object, delete, missing keys. Postgres: a range reads only the chunk rows it
// covers. S3: a wrong secret or unknown key, 503s and silence become typed errors; the secret is never
// in one. RECORDING_STORE chooses the store; s3 without its settings stops start-up.
import { randomBytes } from "node:crypto"
import { AwsClient } from "aws4fetch"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ConfigError, loadConfig } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"
import { PgRecordingStore } from "../../src/recordings/pg-recording-store.js"
import { CHUNK_BYTES } from "../../src/recordings/recording-chunks.repo.js"
import { type RecordingStore, RecordingStoreError } from "../../src/recordings/recording-store.js"
import { insertRecording } from "../../src/recordings/recordings.repo.js"
import { recordingStoreFor } from "../../src/recordings/recordings.service.js"
import { S3RecordingStore } from "../../src/recordings/s3-recording-store.js"
import { type FakeS3, startFakeS3 } from "../support/fake-s3.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let s3: FakeS3
let tenantId: number
let callId: number
let newCall: () => Promise<number>

/** A workspace of its own with a run to one target, and a new call (attempt) of it for each ask. */
async function seedCalls(sql: Sql): Promise<{ tenantId: number; newCall(): Promise<number> }> {
  const [t] = await sql<[{ id: number }]>`
    insert into tenants (name, country, currency) values ('recording store', 'US', 'USD') returning id`
  const [w] = await sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt) values (${t.id}, 'rec', 'priya', 'r') returning id`
  const [run] = await sql<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, status) values (${t.id}, ${w.id}, 'completed') returning id`
  const [target] = await sql<[{ id: number }]>`
    insert into audience_targets (tenant_id, workflow_id, phone_e164) values (${t.id}, ${w.id}, '+12025550147')
    returning id`
  const [rt] = await sql<[{ id: number }]>`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
    values (${t.id}, ${run.id}, ${target.id}, '+12025550147', 'done') returning id`
  let attempt = 0
  const newCall = async () => {
    const [call] = await sql<[{ id: number }]>`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status)
      values (${t.id}, ${run.id}, ${w.id}, ${rt.id}, ${target.id}, ${++attempt}, '+12025550147', 'sim', 'test', 'ended')
      returning id`
    return call.id
  }
  return { tenantId: t.id, newCall }
}

/** A recordings row (of a call of its own) for the pg store's chunks to belong to: its key. */
async function pgKey(): Promise<string> {
  const call = await newCall()
  const row = await srv.sql.begin((tx) =>
    insertRecording(tx, {
      tenantId,
      callId: call,
      track: "mixed",
      store: "pg",
      objectKey: undefined,
      contentType: "audio/ogg",
      bytes: 0,
      durationMs: 0,
    }),
  )
  return row.object_key
}

async function readAll(it: AsyncIterable<Uint8Array>): Promise<{ bytes: Buffer; chunks: number[] }> {
  const parts: Uint8Array[] = []
  for await (const c of it) parts.push(c)
  return { bytes: Buffer.concat(parts), chunks: parts.map((p) => p.byteLength) }
}

async function failure(p: Promise<unknown>): Promise<RecordingStoreError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(e).toBeInstanceOf(RecordingStoreError)
  return e as RecordingStoreError
}

beforeAll(async () => {
  srv = await sharedTestServer()
  s3 = await startFakeS3()
  ;({ tenantId, newCall } = await seedCalls(srv.sql))
  callId = await newCall()
})
afterAll(async () => {
  await s3?.close()
  await srv?.stop()
})
beforeEach(() => s3.reset())

/** 700 KiB: two whole chunks and a part of a third. */
const SIZE = 2 * CHUNK_BYTES + 188 * 1024

interface Case {
  readonly name: "pg" | "s3"
  store(): RecordingStore
  /** A key to put under (pg: a fresh recordings row's id; s3: any key). */
  key(): Promise<string>
}

const cases: Case[] = [
  { name: "pg", store: () => new PgRecordingStore(srv.sql), key: pgKey },
  {
    name: "s3",
    store: () => new S3RecordingStore({ ...s3.settings, timeoutMs: 2_000, idleTimeoutMs: 1_000 }),
    key: async () => `t${tenantId}/c${callId}/mixed-${randomBytes(8).toString("hex")}.ogg`,
  },
]

describe.each(cases)("the $name store", (c) => {
  it("puts and reads an object whole, in chunks", async () => {
    const store = c.store()
    expect(store.kind).toBe(c.name)
    const key = await c.key()
    const bytes = randomBytes(SIZE)
    await store.put(key, bytes, "audio/ogg")
    const { bytes: back, chunks } = await readAll(store.read(key))
    expect(back.equals(bytes)).toBe(true)
    expect(chunks.length).toBeGreaterThan(1)
    expect(Math.max(...chunks)).toBeLessThanOrEqual(CHUNK_BYTES)
  })

  it("reads ranges inside a chunk and across chunk borders, an end past the last byte up to it", async () => {
    const store = c.store()
    const key = await c.key()
    const bytes = randomBytes(SIZE)
    await store.put(key, bytes, "audio/ogg")
    const ranges: Array<[number, number]> = [
      [0, 0],
      [10, 99],
      [CHUNK_BYTES - 1, CHUNK_BYTES], // the last byte of chunk 0 and the first of chunk 1
      [CHUNK_BYTES, 2 * CHUNK_BYTES - 1], // exactly chunk 1
      [CHUNK_BYTES - 10, 2 * CHUNK_BYTES + 10], // three chunks, the first and last sliced
      [SIZE - 1, SIZE - 1],
      [0, SIZE - 1],
    ]
    for (const [start, end] of ranges) {
      const { bytes: got } = await readAll(store.read(key, { start, end }))
      expect(got.equals(bytes.subarray(start, end + 1)), `${start}-${end}`).toBe(true)
    }
    const { bytes: tail } = await readAll(store.read(key, { start: SIZE - 5, end: SIZE + 1000 }))
    expect(tail.equals(bytes.subarray(SIZE - 5))).toBe(true)
  })

  it("refuses a range that starts past the end, and a key with nothing under it", async () => {
    const store = c.store()
    const key = await c.key()
    await store.put(key, randomBytes(1000), "audio/ogg")
    const past = await failure(readAll(store.read(key, { start: 1000, end: 2000 })))
    expect(past).toMatchObject({ store: c.name, op: "read", reason: "range", retryable: false })
    const missing = await c.key()
    expect(await failure(readAll(store.read(missing)))).toMatchObject({ reason: "not_found" })
    expect(await failure(readAll(store.read(missing, { start: 0, end: 10 })))).toMatchObject({ reason: "not_found" })
  })

  it("replaces an object put again, keeps an empty one, and deletes (a missing key too)", async () => {
    const store = c.store()
    const key = await c.key()
    await store.put(key, randomBytes(CHUNK_BYTES * 2), "audio/ogg")
    const second = randomBytes(100)
    await store.put(key, second, "audio/ogg")
    expect((await readAll(store.read(key))).bytes.equals(second)).toBe(true)
    await store.put(key, new Uint8Array(0), "audio/ogg")
    expect((await readAll(store.read(key))).bytes.byteLength).toBe(0)
    await store.delete(key)
    expect(await failure(readAll(store.read(key)))).toMatchObject({ reason: "not_found" })
    await store.delete(key)
    await store.delete(await c.key())
  })

  it("stops fetching when the reader stops early", async () => {
    const store = c.store()
    const key = await c.key()
    const bytes = randomBytes(SIZE)
    await store.put(key, bytes, "audio/ogg")
    for await (const first of store.read(key)) {
      expect(Buffer.from(first).equals(bytes.subarray(0, first.byteLength))).toBe(true)
      break
    }
    // The store is still usable afterwards (nothing left half-read in the way).
    expect((await readAll(store.read(key, { start: 5, end: 9 }))).bytes.equals(bytes.subarray(5, 10))).toBe(true)
  })
})

describe("the pg store", () => {
  it("reads only the chunk rows a range covers", async () => {
    const asked: Array<readonly unknown[]> = []
    const sql = srv.sql
    const spy = Object.assign((strings: TemplateStringsArray, ...args: unknown[]) => {
      if (strings.join("?").includes("seq between")) asked.push(args.slice(1))
      return (sql as unknown as (s: TemplateStringsArray, ...a: unknown[]) => unknown)(strings, ...args)
    }, sql) as unknown as Sql
    const store = new PgRecordingStore(spy)
    const key = await pgKey()
    const bytes = randomBytes(SIZE)
    await new PgRecordingStore(sql).put(key, bytes, "audio/ogg")
    await readAll(store.read(key, { start: CHUNK_BYTES + 5, end: CHUNK_BYTES + 10 }))
    expect(asked).toEqual([[1, 1]])
    asked.length = 0
    await readAll(store.read(key, { start: CHUNK_BYTES - 1, end: CHUNK_BYTES }))
    expect(asked).toEqual([[0, 1]])
    const [rows] = await sql<[{ n: number }]>`
      select count(*)::int as n from recording_chunks where recording_id = ${Number(key)}`
    expect(rows.n).toBe(3)
  })

  it("puts only for a recordings row that exists", async () => {
    const store = new PgRecordingStore(srv.sql)
    expect(await failure(store.put("999999999", randomBytes(10), "audio/ogg"))).toMatchObject({
      reason: "not_found",
      op: "put",
    })
    expect(await failure(store.put("not-an-id", randomBytes(10), "audio/ogg"))).toMatchObject({ reason: "not_found" })
  })
})

describe("the s3 store", () => {
  const store = (o: Partial<ConstructorParameters<typeof S3RecordingStore>[0]> = {}) =>
    new S3RecordingStore({ ...s3.settings, timeoutMs: 500, idleTimeoutMs: 500, ...o })

  it("sends path-style signed requests: the object under its key, a range as Range", async () => {
    const key = `t${tenantId}/c${callId}/sides-0123456789abcdef.ogg`
    await store().put(key, randomBytes(2000), "audio/ogg")
    expect(s3.object(key)?.contentType).toBe("audio/ogg")
    await readAll(store().read(key, { start: 100, end: 199 }))
    expect(s3.requests).toEqual([
      { method: "PUT", path: `/${s3.bucket}/${key}`, range: undefined, status: 200, code: undefined },
      { method: "GET", path: `/${s3.bucket}/${key}`, range: "bytes=100-199", status: 206, code: undefined },
    ])
  })

  it("signs keys with characters that need encoding as S3 canonicalises them", async () => {
    const key = "t1/c2/odd name+(1)!*'~.ogg"
    const bytes = randomBytes(300)
    await store().put(key, bytes, "audio/ogg")
    expect(s3.object(key)?.bytes.equals(bytes)).toBe(true)
    expect((await readAll(store().read(key))).bytes.equals(bytes)).toBe(true)
  })

  it("fails typed, without the secret, for a wrong secret or an unknown key", async () => {
    const wrongSecret = "wrong-secret-0123456789abcdefghijklmnopqrstuv"
    const bad = await failure(store({ secretAccessKey: wrongSecret }).put("t1/c1/x.ogg", randomBytes(10), "audio/ogg"))
    expect(bad).toMatchObject({ reason: "auth", status: 403, code: "SignatureDoesNotMatch", retryable: false })
    for (const secret of [wrongSecret, s3.secretAccessKey]) expect(bad.message).not.toContain(secret)
    expect(s3.requests).toHaveLength(1) // an auth failure is not retried
    const unknown = await failure(readAll(store({ accessKeyId: "AKIANOBODY0000000000" }).read("t1/c1/x.ogg")))
    expect(unknown).toMatchObject({ reason: "auth", status: 403, code: "InvalidAccessKeyId" })
    expect(s3.keys()).not.toContain("t1/c1/x.ogg")
  })

  it("retries a 503, and fails typed once it keeps coming", async () => {
    s3.fail(1, { status: 503 })
    await store().put("t1/c1/retried.ogg", randomBytes(10), "audio/ogg")
    expect(s3.requests.map((r) => r.status)).toEqual([503, 200])
    s3.reset()
    s3.fail(3, { status: 503 })
    const e = await failure(store().put("t1/c1/refused.ogg", randomBytes(10), "audio/ogg"))
    expect(e).toMatchObject({ reason: "unavailable", status: 503, code: "SlowDown", retryable: true })
    expect(e.message).toContain("gave up after 3 attempts")
    s3.fail(3, { status: 500 })
    expect(await failure(store().delete("t1/c1/retried.ogg"))).toMatchObject({ reason: "unavailable", status: 500 })
    s3.fail(3, { status: 503 })
    expect(await failure(readAll(store().read("t1/c1/retried.ogg")))).toMatchObject({ reason: "unavailable" })
  })

  it("times out a request left unanswered, and a body that stops coming", async () => {
    s3.fail(3, "hang")
    const started = Date.now()
    const e = await failure(store({ timeoutMs: 200 }).delete("t1/c1/any.ogg"))
    expect(e).toMatchObject({ reason: "unreachable", op: "delete" })
    expect(e.message).toContain("no answer within 200 ms")
    expect(Date.now() - started).toBeLessThan(5_000)
    s3.reset()
    const key = "t1/c1/stalled.ogg"
    await store().put(key, randomBytes(SIZE), "audio/ogg")
    s3.fail(1, "stall")
    const stalled = await failure(readAll(store({ idleTimeoutMs: 200 }).read(key)))
    expect(stalled).toMatchObject({ reason: "unreachable", op: "read" })
    expect(stalled.message).toContain("no more bytes within 200 ms")
  })

  it("is checked by a signature the fake computes itself: another client's pass, altered requests fail", async () => {
    const client = new AwsClient({
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
      service: "s3",
      region: s3.region,
      retries: 0,
    })
    const url = `${s3.url}/${s3.bucket}/t9/c9/other.ogg`
    expect((await client.fetch(url, { method: "PUT", body: "abc" })).status).toBe(200)
    const get = await client.fetch(url, { headers: { range: "bytes=1-" } })
    expect([get.status, get.headers.get("content-range"), await get.text()]).toEqual([206, "bytes 1-2/3", "bc"])
    const outOfRange = await client.fetch(url, { headers: { range: "bytes=3-5" } })
    expect([outOfRange.status, outOfRange.headers.get("content-range")]).toEqual([416, "bytes */3"])
    expect(await outOfRange.text()).toContain("<Code>InvalidRange</Code>")
    const head = await client.fetch(url, { method: "HEAD" })
    expect([head.status, head.headers.get("content-length")]).toEqual([200, "3"])
    // Signed for one path, sent to another.
    const signed = await client.sign(url, { method: "GET" })
    const moved = await fetch(`${s3.url}/${s3.bucket}/t9/c9/else.ogg`, { headers: signed.headers })
    expect([moved.status, await moved.text()]).toEqual([403, expect.stringContaining("SignatureDoesNotMatch")])
    // A body other than the one its hash was signed with.
    const put = await client.sign(url, {
      method: "PUT",
      body: "abc",
      headers: { "x-amz-content-sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
    })
    const swapped = await fetch(url, { method: "PUT", headers: put.headers, body: "abd" })
    expect([swapped.status, await swapped.text()]).toEqual([400, expect.stringContaining("XAmzContentSHA256Mismatch")])
    const unsigned = await fetch(url)
    expect(unsigned.status).toBe(403)
  })
})

describe("RECORDING_STORE", () => {
  const s3Env = {
    RECORDING_STORE: "s3",
    S3_ENDPOINT: "http://127.0.0.1:9000/",
    S3_BUCKET: "call-recordings",
    S3_ACCESS_KEY_ID: "AKIAEXAMPLE",
    S3_SECRET_ACCESS_KEY: "not-in-any-message",
  }

  it("is pg by default, and s3 with every S3 setting (region us-east-1 unless given)", () => {
    const pg = loadConfig({})
    expect([pg.recordingStore, pg.s3]).toEqual(["pg", undefined])
    expect(recordingStoreFor(pg, srv.sql).kind).toBe("pg")
    const s3c = loadConfig(s3Env)
    expect(s3c.s3).toEqual({
      endpoint: "http://127.0.0.1:9000",
      bucket: "call-recordings",
      region: "us-east-1",
      accessKeyId: "AKIAEXAMPLE",
      secretAccessKey: "not-in-any-message",
    })
    expect(loadConfig({ ...s3Env, S3_REGION: "eu-west-1" }).s3?.region).toBe("eu-west-1")
    expect(recordingStoreFor(s3c, srv.sql).kind).toBe("s3")
  })

  it("stops start-up for s3 without its settings, or a store it does not know, naming the variables", () => {
    const missing = (() => {
      try {
        loadConfig({ RECORDING_STORE: "s3", S3_BUCKET: "call-recordings" })
      } catch (e) {
        return e
      }
    })() as ConfigError
    expect(missing).toBeInstanceOf(ConfigError)
    for (const v of ["S3_ENDPOINT", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"])
      expect(missing.message).toContain(`${v}: required when RECORDING_STORE=s3`)
    expect(missing.message).not.toContain("S3_BUCKET")
    expect(() => loadConfig({ RECORDING_STORE: "gcs" })).toThrow(/RECORDING_STORE: must be "pg" or "s3"/)
    expect(() => loadConfig({ ...s3Env, S3_ENDPOINT: "ftp://x" })).toThrow(/S3_ENDPOINT/)
    expect(() => loadConfig({ ...s3Env, S3_BUCKET: "Bad_Bucket" })).toThrow(/S3_BUCKET/)
  })
})
