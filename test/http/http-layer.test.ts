// The HTTP layer through the real server: routing, the /v1 prefix, validation and the contract's
// error bodies, body limits, multipart, raw bytes, streams with backpressure, aborts, defects,
// system-key auth and request ids. No bad input may produce a 5xx or stop the server.
import { createHash } from "node:crypto"
import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer } from "../support/harness.js"
import { newProbeState, type ProbeState, probeRoutes } from "../support/probes.js"
import { rawRequest } from "../support/raw-http.js"

const SYSTEM_KEY = "s3cret-system-key-0123456789"
const state: ProbeState = newProbeState()
let srv: TestServer

beforeAll(async () => {
  srv = await startTestServer({
    extraRoutes: probeRoutes(state),
    env: { SYSTEM_KEY, BODY_LIMIT_BYTES: "4096", UPLOAD_LIMIT_BYTES: "65536" },
  })
})
afterAll(async () => srv?.stop())

const get = (path: string, init?: RequestInit) => fetch(srv.url + path, init)
const postJson = (
  path: string,
  body: string,
  headers: Record<string, string> = { "content-type": "application/json" },
) => fetch(srv.url + path, { method: "POST", body, headers })

async function expectError(res: Response, status: number, code: string, field?: string) {
  expect(res.status).toBe(status)
  expect(res.headers.get("content-type")).toMatch(/^application\/json/)
  const body = (await res.json()) as { error: unknown; code: unknown; field?: unknown }
  expect(typeof body.error).toBe("string")
  expect(body.code).toBe(code)
  if (field !== undefined) expect(body.field).toBe(field)
  return body
}

async function stillServing() {
  const res = await get("/pricing")
  expect(res.status).toBe(200)
}

describe("routing", () => {
  it("answers unknown routes with 404 NOT_FOUND in the contract's shape", async () => {
    await expectError(await get("/nope"), 404, "NOT_FOUND")
    await expectError(await get("/api/objections/1/extra"), 404, "NOT_FOUND")
    await expectError(await postJson("/does/not/exist", "{}"), 404, "NOT_FOUND")
  })

  it("answers a known path with the wrong method with 405 and Allow", async () => {
    const res = await fetch(`${srv.url}/pricing`, { method: "DELETE" })
    await expectError(res, 405, "METHOD_NOT_ALLOWED")
    expect(res.headers.get("allow")).toBe("GET, HEAD")
  })

  it("serves every route under /v1 too", async () => {
    const [a, b] = await Promise.all([get("/pricing"), get("/v1/pricing")])
    expect(b.status).toBe(200)
    expect(await b.json()).toEqual(await a.json())
    expect((await get("/v1/test/items/7")).status).toBe(200)
    await expectError(await get("/v1/nope"), 404, "NOT_FOUND")
  })

  it("treats a trailing slash as the same resource and HEAD like GET without a body", async () => {
    expect((await get("/pricing/")).status).toBe(200)
    const head = await fetch(`${srv.url}/pricing`, { method: "HEAD" })
    expect(head.status).toBe(200)
    expect(Number(head.headers.get("content-length"))).toBeGreaterThan(100)
    expect(await head.text()).toBe("")
  })
})

describe("validation", () => {
  it("refuses non-integer ids with 422 naming the field", async () => {
    for (const bad of ["abc", "1.5", "-3", "0", "12abc", "99999999999999999999", "%20"]) {
      await expectError(await get(`/test/items/${bad}`), 422, "VALIDATION_FAILED", "id")
    }
    expect(await (await get("/test/items/42")).json()).toEqual({ id: 42, limit: null, flag: null })
  })

  it("refuses invalid query values with 422 and lists every error", async () => {
    await expectError(await get("/test/items/1?limit=0"), 422, "VALIDATION_FAILED", "limit")
    await expectError(await get("/test/items/1?limit=ten"), 422, "VALIDATION_FAILED", "limit")
    await expectError(await get("/test/items/1?flag=maybe"), 422, "VALIDATION_FAILED", "flag")
    const body = (await (await get("/test/items/1?limit=99&flag=x")).json()) as { errors: Array<{ field: string }> }
    expect(body.errors.map((e) => e.field).sort()).toEqual(["flag", "limit"])
    expect(await (await get("/test/items/1?limit=50&flag=false")).json()).toEqual({ id: 1, limit: 50, flag: false })
  })

  it("refuses a body that fails its schema with 422 and the field", async () => {
    const body = await expectError(
      await postJson("/test/echo", JSON.stringify({ name: "" })),
      422,
      "VALIDATION_FAILED",
      "name",
    )
    expect(body).toHaveProperty("errors")
    await expectError(
      await postJson("/test/echo", JSON.stringify({ name: "ok", n: 1.5 })),
      422,
      "VALIDATION_FAILED",
      "n",
    )
    await expectError(await postJson("/test/echo", "[]"), 422, "VALIDATION_FAILED")
    await expectError(await postJson("/test/echo", "null"), 422, "VALIDATION_FAILED")
    const ok = await postJson("/test/echo", JSON.stringify({ name: "ok", n: 3 }))
    expect(ok.status).toBe(201)
    expect(await ok.json()).toEqual({ got: { name: "ok", n: 3 } })
  })

  it("answers malformed JSON with 400 BAD_JSON", async () => {
    for (const bad of ["{", "{name: 1}", "nul", '{"name":"a",}', "\u0000"]) {
      await expectError(await postJson("/test/echo", bad), 400, "BAD_JSON")
    }
  })

  it("answers a wrong content type with 415", async () => {
    await expectError(
      await postJson("/test/echo", "name=x", { "content-type": "application/x-www-form-urlencoded" }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    )
    await expectError(
      await postJson("/test/echo", '{"name":"x"}', { "content-type": "text/plain" }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    )
    // A JSON-only route refuses multipart.
    const form = new FormData()
    form.set("name", "x")
    await expectError(
      await fetch(`${srv.url}/test/echo`, { method: "POST", body: form }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    )
  })

  it("accepts application/json with a charset and +json types", async () => {
    const res = await postJson("/test/echo", '{"name":"ü"}', { "content-type": "application/json; charset=utf-8" })
    expect(res.status).toBe(201)
    expect(await res.json()).toEqual({ got: { name: "ü" } })
    expect(
      (await postJson("/test/echo", '{"name":"x"}', { "content-type": "application/merge-patch+json" })).status,
    ).toBe(201)
  })
})

describe("body limits", () => {
  it("refuses a declared oversize body with 413 before reading it", async () => {
    const res = await postJson("/test/echo", JSON.stringify({ name: "x".repeat(5000) }))
    const body = await expectError(res, 413, "PAYLOAD_TOO_LARGE")
    expect(body).toMatchObject({ limit_bytes: 4096 })
  })

  it("refuses an oversize chunked body with 413 once the limit is passed", async () => {
    const chunk = "x".repeat(1000)
    const pieces = [
      "POST /test/raw HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n" +
        "Transfer-Encoding: chunked\r\n\r\n",
    ]
    for (let i = 0; i < 8; i++) pieces.push(`${chunk.length.toString(16)}\r\n${chunk}\r\n`)
    pieces.push("0\r\n\r\n")
    const res = await rawRequest(srv.port, pieces)
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" })
    await stillServing()
  })

  it("gives multipart routes the upload limit", async () => {
    const form = new FormData()
    form.set("file", new Blob([Buffer.alloc(20_000, 65)]), "a.csv")
    const res = await fetch(`${srv.url}/test/upload`, { method: "POST", body: form })
    expect(res.status).toBe(200)
    const big = new FormData()
    big.set("file", new Blob([Buffer.alloc(70_000, 65)]), "a.csv")
    await expectError(await fetch(`${srv.url}/test/upload`, { method: "POST", body: big }), 413, "PAYLOAD_TOO_LARGE")
  })
})

describe("bodies", () => {
  it("hands multipart parts to the handler with names, filenames and types", async () => {
    const form = new FormData()
    form.set("note", "hello")
    form.set("file", new Blob(["phone,name\n+14155550100,Ann\n"], { type: "text/csv" }), "audience.csv")
    const res = await fetch(`${srv.url}/test/upload`, { method: "POST", body: form })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({
      json_rows: null,
      parts: [
        { name: "note", filename: null, type: null, bytes: 5, text: "hello" },
        { name: "file", filename: "audience.csv", type: "text/csv", bytes: 28, text: "phone,name\n+14155550100,Ann\n" },
      ],
    })
  })

  it("takes JSON on a route that also accepts multipart", async () => {
    const res = await postJson("/test/upload", JSON.stringify({ rows: [{ phone: "1" }, { phone: "2" }] }))
    expect(await res.json()).toEqual({ json_rows: 2, parts: null })
  })

  it("answers a multipart body without a usable boundary with 400 BAD_MULTIPART", async () => {
    const res = await postJson("/test/upload", "garbage", { "content-type": "multipart/form-data" })
    await expectError(res, 400, "BAD_MULTIPART")
  })

  it("gives raw routes the exact bytes, whatever the content type", async () => {
    const bytes = Buffer.from([0, 1, 2, 255, 254, 13, 10, 0x7b])
    const res = await fetch(`${srv.url}/test/raw`, {
      method: "POST",
      body: bytes,
      headers: { "content-type": "application/weird" },
    })
    expect(await res.json()).toEqual({
      sha256: createHash("sha256").update(bytes).digest("hex"),
      length: 8,
      type: "application/weird",
    })
    const empty = await fetch(`${srv.url}/test/raw`, { method: "POST" })
    expect(await empty.json()).toMatchObject({ length: 0 })
  })
})

describe("streams", () => {
  it("holds the producer while the client stops reading, then delivers every byte", async () => {
    const n = 800 // 50 MiB: far more than the kernel's socket buffers hold
    state.streamBuffered = []
    const res = await get(`/test/stream?n=${n}`)
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    let total = (await reader.read()).value!.length
    // The client pauses: once the socket buffers fill, the producer must wait, not pile up data.
    await new Promise((r) => setTimeout(r, 300))
    const pausedAt = state.streamWritten
    await new Promise((r) => setTimeout(r, 300))
    expect(state.streamWritten - pausedAt).toBeLessThanOrEqual(1)
    expect(pausedAt).toBeLessThan(n / 2)
    let chunkIndexOk = true
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      // Each 64 KiB chunk is filled with its index mod 251: bytes arrive in order and intact.
      const offset = total
      for (let j = 0; j < value.length; j += 4096)
        if (value[j] !== Math.floor((offset + j) / 65536) % 251) chunkIndexOk = false
      total += value.length
    }
    expect(chunkIndexOk).toBe(true)
    expect(total).toBe(n * 64 * 1024)
    expect(state.streamEnded).toBe(true)
    // The writer saw the backlog while the client lagged.
    expect(Math.max(...state.streamBuffered)).toBeGreaterThan(0)
  })

  it("stops a stream whose client went away", async () => {
    state.streamEnded = false
    const ac = new AbortController()
    const res = await get("/test/stream?n=10000", { signal: ac.signal })
    const reader = res.body!.getReader()
    await reader.read()
    ac.abort()
    await expect.poll(() => state.streamEnded, { timeout: 5_000 }).toBe(true)
    await stillServing()
  })

  it("cuts the connection of a stream whose producer fails, so the client never takes it for whole", async () => {
    // No terminating chunk: the request or the body fails (the close may reach the client before the
    // first rows do) instead of ending cleanly with two of its rows.
    const outcome = await get("/test/stream-fails").then(
      (res) =>
        res.text().then(
          () => "whole",
          () => "broken",
        ),
      () => "broken",
    )
    expect(outcome).toBe("broken")
    await stillServing()
  })
})

describe("failures never take the server down", () => {
  it("maps a handler defect to 500 INTERNAL with the request id", async () => {
    const res = await get("/test/defect", { headers: { "x-request-id": "req-defect-1" } })
    await expectError(res, 500, "INTERNAL")
    expect(res.headers.get("x-request-id")).toBe("req-defect-1")
    await expectError(await get("/test/throw"), 500, "INTERNAL")
    await stillServing()
  })

  it("survives clients that abort mid-request and mid-body", async () => {
    const before = state.aborted
    const ac = new AbortController()
    const pending = get("/test/slow?ms=5000", { signal: ac.signal }).catch(() => "aborted")
    await new Promise((r) => setTimeout(r, 100))
    ac.abort()
    expect(await pending).toBe("aborted")
    await expect.poll(() => state.aborted, { timeout: 3_000 }).toBe(before + 1)

    // Half a body, then the connection drops.
    await new Promise<void>((resolve) => {
      const s = connect(srv.port, "127.0.0.1", () => {
        s.write(
          "POST /test/echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" +
            'Content-Length: 100\r\n\r\n{"name":',
        )
        setTimeout(() => {
          s.destroy()
          resolve()
        }, 50)
      })
    })
    await stillServing()
  })

  it("survives garbage on the wire", async () => {
    for (const junk of [
      "\x00\x01\x02\r\n\r\n",
      "GET\r\n\r\n",
      "POST /test/echo HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "GARBAGE / HTTP/9.9\r\n\r\n",
    ]) {
      await rawRequest(srv.port, junk, { timeoutMs: 500 }).catch(() => undefined)
    }
    await stillServing()
  })
})

describe("request ids", () => {
  it("echoes a well-formed X-Request-Id and generates one otherwise", async () => {
    const given = await get("/pricing", { headers: { "x-request-id": "abc-123" } })
    expect(given.headers.get("x-request-id")).toBe("abc-123")
    const generated = await get("/pricing", { headers: { "x-request-id": "bad id with spaces" } })
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    const other = await get("/pricing")
    expect(other.headers.get("x-request-id")).not.toBe(generated.headers.get("x-request-id"))
  })
})

describe("system-key routes", () => {
  const post = (headers: Record<string, string>) => fetch(`${srv.url}/test/system`, { method: "POST", headers })

  it("refuse a missing or wrong X-System-Key with 401", async () => {
    await expectError(await post({}), 401, "UNAUTHENTICATED")
    await expectError(await post({ "x-system-key": "wrong" }), 401, "UNAUTHENTICATED")
  })

  it("accept the right key and read X-Tenant-Id", async () => {
    expect(await (await post({ "x-system-key": SYSTEM_KEY, "x-tenant-id": "42" })).json()).toEqual({ tenant_id: 42 })
    expect(await (await post({ "x-system-key": SYSTEM_KEY })).json()).toEqual({ tenant_id: null })
    await expectError(
      await post({ "x-system-key": SYSTEM_KEY, "x-tenant-id": "4x" }),
      422,
      "VALIDATION_FAILED",
      "X-Tenant-Id",
    )
  })

  it("are 404 in a deployment without SYSTEM_KEY", async () => {
    const other = await startTestServer({ extraRoutes: probeRoutes(newProbeState()) })
    try {
      const res = await fetch(`${other.url}/test/system`, { method: "POST", headers: { "x-system-key": SYSTEM_KEY } })
      await expectError(res, 404, "NOT_FOUND")
    } finally {
      await other.stop()
    }
  })
})
