// SSE clients for bench/sse, in their own process (the bench runs a few) so they share no event
// loop with the publisher: raw TCP connections reading each event's `id:` and publish timestamp
// (no JSON parse), with a latency histogram, per-client counts and gap checks; driven over IPC.
import { connect, type Socket } from "node:net"

const ID = Buffer.from("id: ")
/** Each turn's text starts with `@<publish time in µs since the epoch> `. */
const TS = Buffer.from('"text":"@')
const HEAD_END = Buffer.from("\r\n\r\n")
/** The last chunk of a chunked body: the server ended the response (the connection may stay open). */
const LAST_CHUNK = Buffer.from("\r\n0\r\n\r\n")

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
  /** The previous read's last bytes, to find the last chunk across two reads. */
  tail: Buffer
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

function onData(c: Client, data: Buffer): void {
  const at = nowUs()
  if (c.headersDone && !c.ended) {
    if (data.indexOf(LAST_CHUNK) >= 0) c.ended = true
    // Split across two reads, the rest of it starts this one with \r, \n or 0.
    else if (
      (data[0] === 13 || data[0] === 10 || data[0] === 48) &&
      Buffer.concat([c.tail, data.subarray(0, LAST_CHUNK.length)]).indexOf(LAST_CHUNK) >= 0
    )
      c.ended = true
    c.tail = data.subarray(Math.max(0, data.length - LAST_CHUNK.length))
  }
  let buf = c.carry === undefined ? data : Buffer.concat([c.carry, data])
  c.carry = undefined
  if (!c.headersDone) {
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
      tail: Buffer.alloc(0),
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
