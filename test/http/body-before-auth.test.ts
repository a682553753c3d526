// Request bodies cost nothing before the caller is known: an anonymous 50 MiB body to an upload
// route is refused without the server's memory growing, and a JSON body, even on a route that
// takes multipart uploads, gets the JSON limit rather than the upload limit.
import { randomBytes } from "node:crypto"
import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { freshDatabase, type SpawnedServer, spawnServer, startTestServer, type TestServer } from "../support/harness.js"
import { rssOutsideWasm, rssOutsideWasmOf } from "../support/memory.js"
import { newProbeState, probeRoutes } from "../support/probes.js"
import { rawRequest } from "../support/raw-http.js"

const MiB = 1024 * 1024

/**
 * What a read body would grow: the server's resident memory outside the embedded database's
 * WebAssembly memory, which grows in steps of tens of MiB whenever PGlite needs them (a background
 * sweep at the wrong moment failed CI at 24 MiB with the whole RSS measured).
 */
const rssOf = rssOutsideWasmOf

/**
 * Waits until a process's RSS has stopped growing: no new high over `quietMs` (a server just
 * started is still loading code and warming its database for a few seconds; that is not a body).
 */
async function settled(pid: number, quietMs = 3_000, timeoutMs = 45_000): Promise<void> {
  const start = Date.now()
  let high = rssOf(pid)
  let since = Date.now()
  while (Date.now() - since < quietMs && Date.now() - start < timeoutMs) {
    await new Promise((r) => setTimeout(r, 100))
    const now = rssOf(pid)
    if (now > high + 256 * 1024) {
      high = now
      since = Date.now()
    }
  }
}

/**
 * Sends `total` bytes of JSON-looking body after `head`, at the pace the server takes them, and
 * stops when the server answers and closes. Resolves with the status line's code (0: none).
 */
function flood(port: number, head: string, total: number, chunked: boolean): Promise<{ status: number; sent: number }> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1")
    const block = Buffer.alloc(64 * 1024, 0x20) // spaces: valid JSON whitespace, the same buffer every time
    let response = ""
    let sent = 0
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0), sent })
    }
    const timer = setTimeout(finish, 20_000)
    socket.on("data", (d) => (response += d.toString("latin1")))
    socket.on("close", finish)
    socket.on("error", () => {})
    socket.on("connect", async () => {
      socket.write(head)
      while (sent < total && !socket.destroyed && response === "") {
        const n = Math.min(block.length, total - sent)
        const piece = n === block.length ? block : block.subarray(0, n)
        const ok = chunked
          ? socket.write(`${n.toString(16)}\r\n`) && socket.write(piece) && socket.write("\r\n")
          : socket.write(piece)
        sent += n
        if (!ok) await new Promise<void>((r) => socket.once("drain", () => r()).once("close", () => r()))
      }
      if (chunked && !socket.destroyed) socket.write("0\r\n\r\n")
    })
  })
}

describe("an anonymous 50 MiB body to an upload route", () => {
  let server: SpawnedServer
  let drop: () => Promise<void>
  let port: number
  const path = "/api/workflows/1/audience"

  beforeAll(async () => {
    const db = await freshDatabase()
    drop = db.drop
    server = await spawnServer({ env: db.env })
    port = Number(new URL(server.url!).port)
    await settled(server.child.pid!)
  }, 120_000)
  afterAll(async () => {
    server?.child.kill("SIGKILL")
    await server?.exited
    await drop?.()
  })

  /**
   * Runs the flood while sampling the server's RSS; answers the status the server logged for it
   * (the client may never read the reply: a write after the server closed fails, and node then
   * drops what it had not read yet) and the largest growth.
   */
  async function measure(head: string, total: number, chunked: boolean) {
    const pid = server.child.pid!
    const id = `flood-${randomBytes(6).toString("hex")}`
    const before = rssOf(pid)
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 10)
    try {
      const result = await flood(port, head.replace("\r\n", `\r\nX-Request-Id: ${id}\r\n`), total, chunked)
      // The request's log line follows the answer; on a loaded machine it may take a while to be read.
      await expect
        .poll(() => server.lines.some((l) => l.req_id === id && l.msg === "request"), { timeout: 15_000 })
        .toBe(true)
      peak = Math.max(peak, rssOf(pid))
      const logged = server.lines.find((l) => l.req_id === id && l.msg === "request")!
      if (result.status !== 0) expect(result.status).toBe(logged.status)
      const bytesIn = (logged.bytes_in as number | undefined) ?? 0
      return { status: logged.status as number, sent: result.sent, bytesIn, growth: peak - before }
    } finally {
      clearInterval(sampler)
    }
  }

  /**
   * Far below the 50 MiB a read body would cost (the old code grew 42–73 MB), above what the
   * server's own background work (sweeps, timers, GC) moves RSS by during a measurement.
   */
  const GROWTH_BOUND = 16 * MiB

  /**
   * `measure`, taken again once if memory grew past the bound: a read body grows it every time,
   * while a collection or a PGlite step on a loaded machine rarely falls inside the same flood twice.
   */
  async function measureSettled(head: string, total: number, chunked: boolean) {
    const first = await measure(head, total, chunked)
    return first.growth < GROWTH_BOUND ? first : measure(head, total, chunked)
  }
  const jsonHead = `POST ${path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n`
  const chunkedHead = `${jsonHead}Transfer-Encoding: chunked\r\n\r\n`

  it("is refused with 401 without reading it when chunked", async () => {
    // Warm up every path (code loaded and compiled) so only a body could make memory grow.
    expect((await measure(chunkedHead, 2 * MiB, true)).status).toBe(401)
    expect(
      (await measure(chunkedHead.replace("Transfer-Encoding: chunked", `Content-Length: ${50 * MiB}`), MiB, false))
        .status,
    ).toBe(413)
    const r = await measureSettled(chunkedHead, 50 * MiB, true)
    expect(r.status).toBe(401)
    // Not a byte of it reached the server's reader (the access log's bytes_in).
    expect(r.bytesIn).toBe(0)
    expect(r.growth).toBeLessThan(GROWTH_BOUND)
    // The server stopped taking the body long before its end.
    expect(r.sent).toBeLessThan(50 * MiB)
  }, 60_000)

  it("is refused with 413 without reading it when its length is declared", async () => {
    const head = `${jsonHead}Content-Length: ${50 * MiB}\r\n\r\n`
    const r = await measureSettled(head, 50 * MiB, false)
    expect(r.status).toBe(413)
    expect(r.bytesIn).toBe(0)
    expect(r.growth).toBeLessThan(GROWTH_BOUND)
  }, 60_000)

  it("is refused with 401 even when it claims to be a multipart upload", async () => {
    const head =
      `POST ${path} HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=b\r\n` +
      `Content-Length: ${50 * MiB}\r\n\r\n`
    // Warm up the multipart path (the parser made, the upload route's plan) with a short flood.
    expect((await measure(head, MiB, false)).status).toBe(401)
    const r = await measureSettled(head, 50 * MiB, false)
    expect(r.status).toBe(401)
    expect(r.bytesIn).toBe(0)
    expect(r.growth).toBeLessThan(GROWTH_BOUND)
  }, 60_000)

  it("logs the body bytes a route does read (bytes_in), so the zeros above are measured", async () => {
    const id = `read-${randomBytes(6).toString("hex")}`
    const body = JSON.stringify({ email: "nobody@example.com", password: "x".repeat(1000) })
    const res = await fetch(`${server.url}/auth/login`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", "x-request-id": id },
    })
    expect(res.status).toBe(401)
    await expect.poll(() => server.lines.find((l) => l.req_id === id)?.bytes_in, { timeout: 15_000 }).toBe(body.length)
  })

  it("leaves the server serving", async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
  })
})

describe("the memory measure", () => {
  const area = (range: string, perms: string, rssKb: number, name = "") =>
    `${range} ${perms} 00000000 00:00 0 ${name}\nSize: 4 kB\nRss: ${rssKb} kB\nPss: ${rssKb} kB\n`

  it("leaves out a WebAssembly memory (between gigabyte guards) and counts everything else", () => {
    const smaps =
      area("00400000-00b6f000", "r--p", 7096, "/usr/bin/node") +
      area("368e2000-37ad8000", "rw-p", 18136, "[heap]") +
      area("7fa40f400000-7fa48f400000", "---p", 0) + // 2 GiB guard
      area("7fa48f400000-7fa497400000", "rw-p", 34604) + // the wasm memory in use
      area("7fa497400000-7fa70f400000", "---p", 0) + // 10 GiB guard
      area("7fa70f400000-7fa70f500000", "rw-p", 1024) + // a heap area beside a guard, not between two
      area("7fb0b8000000-7fb0ba8fa000", "rw-p", 41240)
    expect(rssOutsideWasm(smaps)).toBe((7096 + 18136 + 1024 + 41240) * 1024)
  })

  it("counts a read body: a 64 MiB buffer in this process shows in its measure", () => {
    // The process may give pages back between the two reads (a collection, a freed arena), so a
    // measure that counts the buffer shows it in one of three tries; one that leaves it out never does.
    const held: Buffer[] = []
    let grew = 0
    for (let attempt = 0; attempt < 3 && grew <= 60 * MiB; attempt++) {
      const before = rssOutsideWasmOf(process.pid)
      held.push(Buffer.alloc(64 * MiB, 1))
      grew = rssOutsideWasmOf(process.pid) - before
    }
    expect(grew).toBeGreaterThan(60 * MiB)
    expect(held.every((b) => b[b.length - 1] === 1)).toBe(true)
  })
})

describe("JSON bodies on multipart routes", () => {
  let srv: TestServer
  let user: Session
  beforeAll(async () => {
    srv = await startTestServer({
      extraRoutes: probeRoutes(newProbeState()),
      env: { BODY_LIMIT_BYTES: "65536", UPLOAD_LIMIT_BYTES: String(4 * MiB) },
    })
    user = await api(srv).signup()
  })
  afterAll(async () => srv?.stop())

  const rows = (bytes: number) =>
    JSON.stringify({
      rows: Array.from({ length: Math.ceil(bytes / 20) }, (_, i) => ({ phone: `+1415${String(i).padStart(7, "0")}` })),
    })

  it("get the JSON limit, not the upload limit, with credentials: declared length", async () => {
    const body = rows(200_000)
    const res = await fetch(`${srv.url}/api/workflows/1/audience`, {
      method: "POST",
      body,
      headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
    })
    expect(res.status).toBe(413)
    expect(await res.json()).toMatchObject({ code: "PAYLOAD_TOO_LARGE", limit_bytes: 65536 })
  })

  it("get the JSON limit, not the upload limit, with credentials: chunked", async () => {
    const piece = (s: string) => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`
    const body = rows(200_000)
    const pieces = [
      `POST /test/upload-stream HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${user.token}\r\n` +
        `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    ]
    for (let i = 0; i < body.length; i += 20_000) pieces.push(piece(body.slice(i, i + 20_000)))
    pieces.push("0\r\n\r\n")
    const res = await rawRequest(srv.port, pieces, { timeoutMs: 5_000 })
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body)).toMatchObject({ code: "PAYLOAD_TOO_LARGE", limit_bytes: 65536 })
  })

  it("still take a JSON body within the limit, and a multipart upload past it", async () => {
    const small = await fetch(`${srv.url}/test/upload-stream`, {
      method: "POST",
      body: rows(30_000),
      headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
    })
    expect(small.status).toBe(200)
    const form = new FormData()
    form.set("file", new Blob([`phone\n${"+14155550100\n".repeat(20_000)}`], { type: "text/csv" }), "a.csv") // 260 kB
    const big = await fetch(`${srv.url}/test/upload-stream`, {
      method: "POST",
      body: form,
      headers: { authorization: `Bearer ${user.token}` },
    })
    expect(big.status).toBe(200)
    expect(await big.json()).toMatchObject({ file: { lines: 20_001 } })
  })

  it("are read once the caller is known, whatever arrived while it was checked", async () => {
    // A cookie session is checked against the database (no cache yet): the body waits meanwhile.
    const fresh = await api(srv).signup()
    const body = rows(40_000)
    const res = await fetch(`${srv.url}/test/upload-stream`, {
      method: "POST",
      body,
      headers: { cookie: fresh.cookie, origin: srv.url, "content-type": "application/json" },
    })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ json_rows: Math.ceil(40_000 / 20) })
  })
})
