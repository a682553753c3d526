// Streams and a client that reads steadily but slowly: what the server has taken from the producer
// and not yet delivered stays bounded (uWS does not grow its own buffer by a chunk per writable
// event), a stream whose producer has gone quiet still delivers everything written, and every byte
// arrives once, in order. Raw TCP clients, probe routes that write large chunks.
import { readFileSync } from "node:fs"
import { connect, type NetConnectOpts, type Socket } from "node:net"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { stream } from "../../api/reply.js"
import { type AnyRoute, route } from "../../api/route.js"
import { QueryInt } from "../../api/schemas.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const MiB = 2 ** 20
/** Bytes of the probe's chunks: each byte is its offset in the body mod 251, so order can be checked. */
const patterned = (size: number, offset: number): Buffer => {
  const b = Buffer.allocUnsafe(size)
  for (let i = 0; i < size; i++) b[i] = (offset + i) % 251
  return b
}

interface Probe {
  /** Bytes of chunks whose write() resolved: what the server took from the producer. */
  accepted: number
  /** The writer's bufferedBytes() after each chunk was taken. */
  buffered: number[]
  done: boolean
}
const probe: Probe = { accepted: 0, buffered: [], done: false }

const routes: AnyRoute[] = [
  route({
    method: "GET",
    path: "/test/big-chunks",
    auth: "public",
    summary: "n chunks of mib MiB each, as fast as the writer takes them",
    tags: ["test"],
    query: z.object({ n: QueryInt(1, 1_000), mib: QueryInt(1, 16) }),
    handler: ({ query }) =>
      Effect.succeed(
        stream("application/octet-stream", async (w) => {
          probe.accepted = 0
          probe.buffered = []
          probe.done = false
          const size = query.mib * MiB
          // 251 does not divide the chunk size, so each chunk is cut from one long pattern.
          const pattern = patterned(size + 251, 0)
          for (let i = 0; i < query.n; i++) {
            const skew = (i * size) % 251
            if (!(await w.write(pattern.subarray(skew, skew + size)))) break
            probe.accepted += size
            probe.buffered.push(w.bufferedBytes())
          }
          probe.done = true
        }),
      ),
  }),
  route({
    method: "GET",
    path: "/test/then-quiet",
    auth: "public",
    summary: "one chunk of mib MiB, then nothing until the client leaves",
    tags: ["test"],
    query: z.object({ mib: QueryInt(1, 16) }),
    handler: ({ query }) =>
      Effect.succeed(
        stream("application/octet-stream", async (w) => {
          await w.write(patterned(query.mib * MiB, 0))
          // A quiet producer (an SSE stream between events): the response stays open, nothing more is written.
          await new Promise<void>((resolve) => w.onClose(resolve))
        }),
      ),
  }),
]

let srv: TestServer
beforeAll(async () => {
  srv = await startTestServer({ extraRoutes: routes })
})
afterAll(async () => srv?.stop())

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * The bytes the kernel holds for a loopback connection (Linux /proc/net/tcp): the server socket's
 * send queue and the client socket's receive queue. Server and client share this process, so while
 * the test reads this nothing moves.
 */
function kernelQueued(serverPort: number, clientPort: number): number {
  const hexPort = (p: number) => p.toString(16).toUpperCase().padStart(4, "0")
  let total = 0
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/)
    if (f.length < 5) continue
    const local = f[1]!.split(":")[1]
    const remote = f[2]!.split(":")[1]
    const [tx, rx] = f[4]!.split(":").map((x) => Number.parseInt(x, 16)) as [number, number]
    if (local === hexPort(serverPort) && remote === hexPort(clientPort)) total += tx
    if (local === hexPort(clientPort) && remote === hexPort(serverPort)) total += rx
  }
  return total
}

/** A raw HTTP/1.1 GET whose response the test reads at its own pace; counts body bytes (chunked framing removed). */
class RawReader {
  readonly socket: Socket
  body = 0
  intact = true
  ended = false
  private head = ""
  private inBody = false
  // Chunked decoding state: bytes left in the current chunk, or -1 while reading a size line.
  private left = -1
  private line = ""
  private skipCrlf = 0

  constructor(port: number, path: string) {
    // Node reads ahead of the test at most this much (its own receive buffer, on top of the kernel's).
    // (Node honours the stream option here; its typings leave it out.)
    this.socket = connect({ port, host: "127.0.0.1", readableHighWaterMark: 256 * 1024 } as NetConnectOpts)
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)
    this.socket.pause()
    this.socket.on("error", () => {})
    this.socket.on("end", () => (this.ended = true))
  }

  /** Takes up to `n` bytes the socket has buffered (asking it to read more from the kernel). */
  take(n: number): number {
    const available = Math.min(n, this.socket.readableLength)
    const chunk = available > 0 ? (this.socket.read(available) as Buffer | null) : null
    if (chunk === null) {
      this.socket.read(0)
      return 0
    }
    this.feed(chunk)
    return chunk.length
  }

  private feed(buf: Buffer): void {
    let i = 0
    if (!this.inBody) {
      this.head += buf.toString("latin1")
      const end = this.head.indexOf("\r\n\r\n")
      if (end < 0) return
      i = buf.length - (this.head.length - end - 4)
      this.inBody = true
    }
    while (i < buf.length) {
      if (this.skipCrlf > 0) {
        i++
        this.skipCrlf--
        continue
      }
      if (this.left < 0) {
        const c = String.fromCharCode(buf[i++]!)
        if (c === "\n") {
          this.left = Number.parseInt(this.line.trim(), 16)
          this.line = ""
          if (this.left === 0) this.ended = true
        } else this.line += c
        continue
      }
      const n = Math.min(this.left, buf.length - i)
      for (let j = 0; j < n; j += 997) if (buf[i + j] !== (this.body + j) % 251) this.intact = false
      this.body += n
      this.left -= n
      i += n
      if (this.left === 0) {
        this.left = -1
        this.skipCrlf = 2
      }
    }
  }

  close(): void {
    this.socket.destroy()
  }
}

describe("a stream to a client that reads slowly", () => {
  it("keeps what it took from the producer and has not delivered bounded", { timeout: 60_000 }, async () => {
    // 16 MiB chunks, a client taking 256 KiB every 50 ms. uWS, with an onWritable handler, sends what
    // it buffered only when written to again: a writer that let the producer append a whole chunk per
    // writable event made uWS's buffer grow by most of a chunk each time, towards the whole body.
    const reader = new RawReader(srv.port, "/test/big-chunks?n=60&mib=16")
    await new Promise((r) => reader.socket.once("connect", r))
    let worstGap = 0
    let worstHeld = 0
    try {
      // Until the producer got two chunks taken (or the server shows it holds far more than it should).
      for (let i = 0; i < 600 && probe.accepted < 32 * MiB && worstHeld < 64 * MiB; i++) {
        await sleep(50)
        reader.take(256 * 1024)
        // Taken from the producer, not yet read by the test: in the kernel, in Node's read buffer, or
        // still in the server (uWS's buffer: what must stay small).
        const gap = probe.accepted - reader.body
        const held = gap - kernelQueued(srv.port, reader.socket.localPort!) - reader.socket.readableLength
        worstGap = Math.max(worstGap, gap)
        worstHeld = Math.max(worstHeld, held)
      }
      console.log(
        `accepted ${(probe.accepted / MiB).toFixed(1)} MiB, received ${(reader.body / MiB).toFixed(1)} MiB, ` +
          `largest gap ${(worstGap / MiB).toFixed(1)} MiB, of it in the server ${(worstHeld / MiB).toFixed(2)} MiB`,
      )
      expect(reader.intact).toBe(true)
      // The producer got on: each chunk was taken once the client had read most of it.
      expect(probe.accepted).toBeGreaterThanOrEqual(32 * MiB)
      // Beyond the kernel's socket buffers, the server holds at most the slice uWS is sending, not
      // the chunks taken since.
      expect(worstHeld).toBeLessThan(MiB)
      // The writer counts what it holds: at most the chunk it was given and the slice uWS has.
      expect(Math.max(...probe.buffered, 0)).toBeLessThanOrEqual(16 * MiB + 64 * 1024)
    } finally {
      reader.close()
    }
    await expect.poll(() => probe.done, { timeout: 5_000 }).toBe(true)
  })

  it("delivers every byte written to a stream whose producer then goes quiet", async () => {
    const reader = new RawReader(srv.port, "/test/then-quiet?mib=8")
    try {
      // Read as fast as it comes: all 8 MiB arrive though nothing more is written after them.
      for (let i = 0; i < 400 && reader.body < 8 * MiB; i++) {
        while (reader.take(MiB) > 0) {}
        await sleep(25)
      }
      expect(reader.body).toBe(8 * MiB)
      expect(reader.intact).toBe(true)
      expect(reader.ended).toBe(false)
    } finally {
      reader.close()
    }
  }, 30_000)
})
