// SSE clients for bench/sse, in their own process (the bench runs a few) so they share no event
// loop with the publisher: raw TCP connections reading each event's `id:` and publish timestamp
// (no JSON parse), with a latency histogram, per-client counts and gap checks; driven over IPC.
import { connect, type Socket } from "node:net"

const ID = Buffer.from("id: ")
/** Each turn's text starts with `@<publish time in µs since the epoch> `. */
const TS = Buffer.from('"text":"@')
const HEAD_END = Buffer.from("\r\n\r\n")

const nowUs = (): number => Math.round((performance.timeOrigin + performance.now()) * 1000)

/** Latency in µs: 10 µs buckets below 100 ms, 1 ms buckets up to 120 s (merged by the bench). */
class Histogram {
  readonly fine = new Float64Array(10_000)
  readonly coarse = new Float64Array(120_000)
  count = 0
  max = 0
  add(us: number): void {
    if (us < 0) us = 0
    this.count++
    if (us > this.max) this.max = us
    if (us < 100_000) this.fine[Math.floor(us / 10)]!++
    else this.coarse[Math.min(119_999, Math.floor(us / 1000))]!++
  }
  sparse(): { fine: Array<[number, number]>; coarse: Array<[number, number]>; count: number; max: number } {
    const pairs = (a: Float64Array) => {
      const out: Array<[number, number]> = []
      for (let i = 0; i < a.length; i++) if (a[i]! > 0) out.push([i, a[i]!])
      return out
    }
    return { fine: pairs(this.fine), coarse: pairs(this.coarse), count: this.count, max: this.max }
  }
}

interface Client {
  readonly socket: Socket
  status: number
  headersDone: boolean
  /** An incomplete event (or the response head) left from the previous read. */
  carry: Buffer | undefined
  /**
   * The chunked body's framing: bytes left of the current chunk's data, or -1 while its size line
   * is read (kept in `sizeLine`); `crlf`: bytes of the CRLF after a chunk's data still to skip. A
   * server may cut its body anywhere (Parley slices long writes), so an event can span two chunks.
   */
  chunkLeft: number
  sizeLine: string
  crlf: number
  /** Events with a seq inside the window; the highest seq seen. */
  inWindow: number
  lastSeq: number
  gaps: number
  dups: number
  ended: boolean
  stalled: boolean
}

let clients: Client[] = []
let windowFrom = Infinity
let windowTo = -Infinity
let hist = new Histogram()
let lastArrivalUs = 0

function onEvent(c: Client, seq: number, ts: number, at: number): void {
  if (c.lastSeq >= 0) {
    if (seq <= c.lastSeq) c.dups++
    else if (seq !== c.lastSeq + 1) c.gaps++
  }
  if (seq > c.lastSeq) c.lastSeq = seq
  if (seq >= windowFrom && seq <= windowTo) {
    c.inWindow++
    // Stalled clients' latency says nothing about the server; they are reported apart.
    if (!c.stalled) {
      hist.add(at - ts)
      if (at > lastArrivalUs) lastArrivalUs = at
    }
  }
}

/** Reads the events in a body buffer; returns where an incomplete one starts (to carry over). */
function scan(c: Client, buf: Buffer, at: number): number {
  let pos = 0
  const len = buf.length
  for (;;) {
    const i = buf.indexOf(ID, pos)
    if (i < 0) return Math.max(pos, len - ID.length + 1)
    let j = i + ID.length
    let seq = 0
    let ch = 0
    while (j < len && (ch = buf[j]!) >= 48 && ch <= 57) {
      seq = seq * 10 + ch - 48
      j++
    }
    if (j >= len) return i
    const k = buf.indexOf(TS, j)
    if (k < 0) return i
    let m = k + TS.length
    let ts = 0
    while (m < len && (ch = buf[m]!) >= 48 && ch <= 57) {
      ts = ts * 10 + ch - 48
      m++
    }
    if (m >= len) return i
    onEvent(c, seq, ts, at)
    pos = m
  }
}

/** The body bytes of `data` without the chunked framing; marks the client ended at the last chunk. */
function dechunk(c: Client, data: Buffer): Buffer {
  const parts: Buffer[] = []
  let i = 0
  while (i < data.length && !c.ended) {
    if (c.crlf > 0) {
      const n = Math.min(c.crlf, data.length - i)
      c.crlf -= n
      i += n
    } else if (c.chunkLeft < 0) {
      const nl = data.indexOf(10, i)
      if (nl < 0) {
        c.sizeLine += data.toString("latin1", i)
        break
      }
      const size = Number.parseInt((c.sizeLine + data.toString("latin1", i, nl)).trim().split(";")[0]!, 16)
      c.sizeLine = ""
      i = nl + 1
      if (size === 0) c.ended = true
      else c.chunkLeft = size
    } else {
      const n = Math.min(c.chunkLeft, data.length - i)
      parts.push(data.subarray(i, i + n))
      c.chunkLeft -= n
      i += n
      if (c.chunkLeft === 0) {
        c.chunkLeft = -1
        c.crlf = 2
      }
    }
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts)
}

function onData(c: Client, data: Buffer): void {
  const at = nowUs()
  let buf = data
  if (!c.headersDone) {
    buf = c.carry === undefined ? data : Buffer.concat([c.carry, data])
    c.carry = undefined
    const h = buf.indexOf(HEAD_END)
    if (h < 0) {
      c.carry = buf
      return
    }
    c.status = Number(buf.subarray(9, 12).toString("latin1"))
    c.headersDone = true
    buf = buf.subarray(h + HEAD_END.length)
    pendingHeads.get(c)?.()
  }
  const body = dechunk(c, buf)
  buf = c.carry === undefined ? body : Buffer.concat([c.carry, body])
  c.carry = undefined
  const rest = scan(c, buf, at)
  if (rest < buf.length) c.carry = Buffer.from(buf.subarray(rest))
}

const pendingHeads = new Map<Client, () => void>()

function open(host: string, port: number, path: string, headers: Record<string, string>): Promise<Client> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true })
    const c: Client = {
      socket,
      status: 0,
      headersDone: false,
      carry: undefined,
      chunkLeft: -1,
      sizeLine: "",
      crlf: 0,
      inWindow: 0,
      lastSeq: -1,
      gaps: 0,
      dups: 0,
      ended: false,
      stalled: false,
    }
    const head = [
      `GET ${path} HTTP/1.1`,
      `Host: ${host}:${port}`,
      "Accept: text/event-stream",
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      "",
      "",
    ].join("\r\n")
    socket.once("connect", () => socket.write(head))
    socket.on("data", (d: Buffer) => onData(c, d))
    const done = () => {
      c.ended = true
      if (!c.headersDone) reject(new Error(`connection closed before the response head (${path})`))
    }
    socket.once("end", done)
    socket.once("close", done)
    socket.on("error", () => {})
    pendingHeads.set(c, () => {
      pendingHeads.delete(c)
      if (c.status === 200) resolve(c)
      else reject(new Error(`GET ${path}: HTTP ${c.status}`))
    })
  })
}

type Command =
  | {
      id: number
      cmd: "connect"
      host: string
      port: number
      path: string
      headers: Record<string, string>
      n: number
      concurrency: number
    }
  | { id: number; cmd: "window"; from: number; to: number }
  | { id: number; cmd: "stall"; count: number }
  | { id: number; cmd: "report" }
  | { id: number; cmd: "resume-stalled"; waitMs: number }
  | { id: number; cmd: "close" }

async function handle(m: Command): Promise<Record<string, unknown>> {
  switch (m.cmd) {
    case "connect": {
      let next = 0
      const opened: Client[] = []
      const worker = async () => {
        while (next < m.n) {
          next++
          opened.push(await open(m.host, m.port, m.path, m.headers))
        }
      }
      await Promise.all(Array.from({ length: Math.min(m.concurrency, m.n) }, worker))
      clients = opened
      return { connected: opened.length }
    }
    case "window":
      windowFrom = m.from
      windowTo = m.to
      hist = new Histogram()
      lastArrivalUs = 0
      for (const c of clients) c.inWindow = 0
      return {}
    case "stall":
      for (const c of clients.slice(0, m.count)) {
        c.stalled = true
        c.socket.pause()
      }
      return {}
    case "report": {
      const expected = windowTo - windowFrom + 1
      const live = clients.filter((c) => !c.stalled)
      const counts = live.map((c) => c.inWindow)
      return {
        clients: live.length,
        received: counts.reduce((a, b) => a + b, 0),
        complete: counts.filter((n) => n === expected).length,
        minPerClient: counts.length === 0 ? expected : Math.min(...counts),
        ended: live.filter((c) => c.ended).length,
        gaps: live.reduce((a, c) => a + c.gaps, 0),
        dups: live.reduce((a, c) => a + c.dups, 0),
        hist: hist.sparse(),
        lastArrivalUs,
      }
    }
    case "resume-stalled": {
      const stalled = clients.filter((c) => c.stalled)
      for (const c of stalled) c.socket.resume()
      await new Promise((r) => setTimeout(r, m.waitMs))
      return {
        stalled: stalled.length,
        ended: stalled.filter((c) => c.ended).length,
        /** The most of the window's events a stalled client had by then. */
        maxInWindow: Math.max(0, ...stalled.map((c) => c.inWindow)),
      }
    }
    case "close": {
      for (const c of clients) c.socket.destroy()
      clients = []
      return {}
    }
  }
}

process.on("message", (raw) => {
  const m = raw as Command
  handle(m).then(
    (r) => process.send!({ type: "reply", id: m.id, ...r }),
    (e: unknown) => process.send!({ type: "reply", id: m.id, error: e instanceof Error ? e.message : String(e) }),
  )
})
process.on("disconnect", () => process.exit(0))
process.send!({ type: "ready" })
