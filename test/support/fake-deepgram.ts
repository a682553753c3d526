// A local stand-in for Deepgram's live transcription WebSocket (/v1/listen on uWebSockets.js, 127.0.0.1:0): it
// checks the key and the audio format, answers results from a script of what the callee says, and records it all.
//
// While audio comes it sends interim results revealing the scripted line a word at a time (and, if asked, final
// segments mid-utterance); a Finalize is answered with the rest of the line as a final result (is_final,
// speech_final, from_finalize), one line per utterance in order. KeepAlive is not answered but keeps the stream
// open; with neither audio nor KeepAlive for idleMs it closes 1011 NET-0001, as the vendor does after 10 s.
// CloseStream is answered with Metadata and a 1000 close. Faults on demand: upgrades refused (429 or any status),
// the next connection dropped mid-stream or after its first utterances (and, if asked, the reconnects refused),
// Finalize answered late or never, raw messages injected.
import { randomUUID } from "node:crypto"
import { loadUws, type us_listen_socket, type WebSocket } from "../../api/uws.js"

const BYTES_PER_SECOND = 8000

export interface FakeDeepgramOptions {
  /** The one key let in (Authorization: Token <key>). */
  readonly apiKey: string
  /** A stream hearing neither audio nor KeepAlive this long is closed 1011 NET-0001; default 10 000 ms. */
  readonly idleMs?: number
  /** An interim result per this much audio; default 1600 bytes (200 ms). */
  readonly interimBytes?: number
  /** Audio per word of the scripted line the results reveal; default 1600 bytes (200 ms). */
  readonly bytesPerWord?: number
  /** A final segment (is_final, not speech_final) each time this much audio has come since the last; default never. */
  readonly segmentBytes?: number
}

/** An upgrade asked for: what it carried and the status answered (101 when let in). */
export interface FakeDeepgramUpgrade {
  readonly headers: Readonly<Record<string, string>>
  readonly query: Readonly<Record<string, string>>
  readonly status: number
}

/** One stream let in, as the fake saw it. */
export interface FakeDeepgramConnection {
  readonly headers: Readonly<Record<string, string>>
  readonly query: Readonly<Record<string, string>>
  /** Audio received: bytes, and binary messages. */
  audioBytes: number
  binaryMessages: number
  /** Each text message by its type ("invalid" for one that is not a JSON object with a string type). */
  readonly controls: string[]
  /** What the fake sent, parsed. */
  readonly sent: Array<Record<string, unknown>>
  /** How it closed; undefined while open. */
  closed: { readonly code: number; readonly reason: string; readonly by: "fake" | "client" } | undefined
}

export interface FakeDeepgram {
  /** ws://127.0.0.1:<port>: a recogniser's baseUrl. */
  readonly url: string
  /** The same server as an API root (http://…), as a byok credential names it. */
  readonly httpUrl: string
  readonly upgrades: readonly FakeDeepgramUpgrade[]
  readonly connections: readonly FakeDeepgramConnection[]
  /** Streams open now. */
  readonly open: number
  /** Lines the callee says next, one per utterance (one per Finalize), after those already given. */
  say(lines: readonly string[]): void
  /** Refuses the next `n` upgrades with `status` (default 429), with Retry-After when given. */
  refuseNext(n: number, status?: number, retryAfterS?: number): void
  /**
   * Closes the next stream to have received `afterBytes` of audio (default 1), or, given `afterUtterances`, the
   * next to have answered that many Finalizes (closed right after the answer): with `code` and `reason` (default
   * 1011 NET-0000, the vendor's internal error; 1008 DATA-0000 is its "not audio it can decode"), or `abrupt`ly,
   * without a close frame (a lost connection). `thenRefuse`: the next `n` upgrades after the drop are refused
   * with `status` (an outage, or credits run out, that the call's reconnects meet).
   */
  dropNext(opts?: {
    afterBytes?: number
    afterUtterances?: number
    code?: number
    reason?: string
    abrupt?: boolean
    thenRefuse?: { n: number; status: number }
  }): void
  /** Answers each Finalize after `ms` from now on (Infinity: never); 0 answers at once. */
  delayFinalize(ms: number): void
  /** Sends `text` as is to every open stream. */
  inject(text: string): void
  /** Closes every stream and stops listening; clears every timer of the fake's. */
  close(): Promise<void>
}

interface Stream {
  readonly record: FakeDeepgramConnection
  readonly requestId: string
  ws: WebSocket<Stream> | undefined
  /** Where (bytes) the utterance under way and its unfinalized segment began, and when the last interim went. */
  uttStart: number
  segStart: number
  lastInterim: number
  /** Words of the line under way already sent as final. */
  said: number
  /** Lines taken by a Finalize whose answer has not gone yet (given back if the stream ends first). */
  readonly awaiting: string[]
  /** Finalizes answered. */
  answered: number
  idle: NodeJS.Timeout | undefined
}

const wordsOf = (line: string): string[] => line.split(/\s+/).filter((w) => w !== "")

export async function startFakeDeepgram(opts: FakeDeepgramOptions): Promise<FakeDeepgram> {
  const uws = loadUws()
  const idleMs = opts.idleMs ?? 10_000
  const interimBytes = opts.interimBytes ?? 1600
  const bytesPerWord = opts.bytesPerWord ?? 1600
  const segmentBytes = opts.segmentBytes ?? Number.POSITIVE_INFINITY
  const script: string[] = []
  const upgrades: FakeDeepgramUpgrade[] = []
  const connections: FakeDeepgramConnection[] = []
  const streams = new Set<Stream>()
  const timers = new Set<NodeJS.Timeout>()
  let refusals: { n: number; status: number; retryAfterS: number | undefined } = {
    n: 0,
    status: 429,
    retryAfterS: undefined,
  }
  let drop:
    | {
        afterBytes: number
        afterUtterances: number | undefined
        code: number
        reason: string
        abrupt: boolean
        thenRefuse: { n: number; status: number } | undefined
      }
    | undefined
  let finalizeDelayMs = 0

  const later = (ms: number, run: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t)
      run()
    }, ms)
    timers.add(t)
  }

  const send = (s: Stream, message: Record<string, unknown>) => {
    const ws = s.ws
    if (ws === undefined || s.record.closed !== undefined) return
    s.record.sent.push(message)
    ws.cork(() => ws.send(JSON.stringify(message), false))
  }

  /** The drop asked for, on `s`; its reconnects refused from then on when asked. */
  const dropNow = (s: Stream) => {
    const { code, reason, abrupt, thenRefuse } = drop!
    drop = undefined
    if (thenRefuse !== undefined) refusals = { ...thenRefuse, retryAfterS: undefined }
    end(s, code, reason, abrupt)
  }

  const end = (s: Stream, code: number, reason: string, abrupt = false) => {
    const ws = s.ws
    if (ws === undefined || s.record.closed !== undefined) return
    s.record.closed = { code: abrupt ? 1006 : code, reason, by: "fake" }
    if (abrupt) ws.close()
    else ws.end(code, reason)
  }

  const touch = (s: Stream) => {
    clearTimeout(s.idle)
    timers.delete(s.idle!)
    const t = setTimeout(() => {
      timers.delete(t)
      end(s, 1011, "NET-0001")
    }, idleMs)
    s.idle = t
    timers.add(t)
  }

  /** The line the audio under way is saying: the next one not yet taken by a Finalize. */
  const lineNow = (): string[] => wordsOf(script[0] ?? "")

  const results = (
    s: Stream,
    from: number,
    to: number,
    transcript: string,
    flags: { is_final: boolean; speech_final: boolean; from_finalize?: boolean },
  ): Record<string, unknown> => {
    const start = from / BYTES_PER_SECOND
    const duration = (to - from) / BYTES_PER_SECOND
    const words = wordsOf(transcript)
    return {
      type: "Results",
      channel_index: [0, 1],
      duration,
      start,
      ...flags,
      channel: {
        alternatives: [
          {
            transcript,
            confidence: 0.98,
            words: words.map((w, i) => ({
              word: w.toLowerCase().replace(/[^a-z']/g, ""),
              start: start + (duration * i) / words.length,
              end: start + (duration * (i + 1)) / words.length,
              confidence: 0.98,
              punctuated_word: w,
            })),
          },
        ],
      },
      metadata: { request_id: s.requestId, model_info: { name: "fake", version: "0", arch: "fake" }, model_uuid: "0" },
    }
  }

  const heardAudio = (s: Stream, bytes: number) => {
    const r = s.record
    r.audioBytes += bytes
    r.binaryMessages++
    touch(s)
    if (drop !== undefined && drop.afterUtterances === undefined && r.audioBytes >= drop.afterBytes) return dropNow(s)
    const total = r.audioBytes
    const words = lineNow()
    const revealed = Math.min(words.length, Math.ceil((total - s.uttStart) / bytesPerWord))
    if (total - s.segStart >= segmentBytes) {
      const text = words.slice(s.said, revealed).join(" ")
      send(s, results(s, s.segStart, total, text, { is_final: true, speech_final: false }))
      s.said = Math.max(s.said, revealed)
      s.segStart = s.lastInterim = total
    } else if (total - s.lastInterim >= interimBytes) {
      const text = words.slice(s.said, revealed).join(" ")
      send(s, results(s, s.segStart, total, text, { is_final: false, speech_final: false }))
      s.lastInterim = total
    }
  }

  const finalize = (s: Stream) => {
    const total = s.record.audioBytes
    // The vendor's answer is not guaranteed without audio to finalize; the fake gives none.
    if (total === s.uttStart) return
    const from = s.segStart
    const line = script.shift() ?? ""
    const text = wordsOf(line).slice(s.said).join(" ")
    s.awaiting.push(line)
    s.uttStart = s.segStart = s.lastInterim = total
    s.said = 0
    const answer = () => {
      if (s.record.closed !== undefined) return
      s.awaiting.shift()
      send(s, results(s, from, total, text, { is_final: true, speech_final: true, from_finalize: true }))
      s.answered++
      if (drop?.afterUtterances !== undefined && s.answered >= drop.afterUtterances) dropNow(s)
    }
    if (finalizeDelayMs === 0) answer()
    else if (Number.isFinite(finalizeDelayMs)) later(finalizeDelayMs, answer)
  }

  const heardText = (s: Stream, text: string) => {
    let type = "invalid"
    try {
      const m: unknown = JSON.parse(text)
      if (typeof m === "object" && m !== null && typeof (m as { type?: unknown }).type === "string")
        type = (m as { type: string }).type
    } catch {
      // recorded as invalid
    }
    s.record.controls.push(type)
    if (type === "KeepAlive") return touch(s)
    if (type === "Finalize") return finalize(s)
    if (type === "CloseStream") {
      send(s, {
        type: "Metadata",
        transaction_key: "deprecated",
        request_id: s.requestId,
        sha256: "0".repeat(64),
        created: new Date().toISOString(),
        duration: s.record.audioBytes / BYTES_PER_SECOND,
        channels: 1,
      })
      return end(s, 1000, "")
    }
  }

  const app = uws.App()
  // The catalogue's live check of a byok credential (GET {api_base_url}/v1/projects, Authorization: Token
  // <key>): 200 for the fake's key, 401 otherwise.
  app.get("/v1/projects", (res, req) => {
    const ok = req.getHeader("authorization") === `Token ${opts.apiKey}`
    res.writeStatus(ok ? "200 OK" : "401 Unauthorized").end(JSON.stringify(ok ? { ok: true } : { error: "bad key" }))
  })
  app.ws<Stream>("/v1/listen", {
    maxPayloadLength: 1024 * 1024,
    idleTimeout: 0,
    upgrade: (res, req, context) => {
      const headers: Record<string, string> = {}
      req.forEach((k, v) => {
        headers[k] = v
      })
      const query = Object.fromEntries(new URLSearchParams(req.getQuery() ?? ""))
      const refuse = (status: number, text: string, body: Record<string, unknown>, retryAfterS?: number) => {
        upgrades.push({ headers, query, status })
        res.cork(() => {
          res.writeStatus(`${status} ${text}`).writeHeader("Content-Type", "application/json")
          res.writeHeader("dg-request-id", randomUUID()).writeHeader("dg-error", String(body.err_msg))
          if (retryAfterS !== undefined) res.writeHeader("Retry-After", String(retryAfterS))
          res.end(JSON.stringify(body), true)
        })
      }
      if (headers.authorization !== `Token ${opts.apiKey}`)
        return refuse(401, "Unauthorized", { err_code: "INVALID_AUTH", err_msg: "Invalid credentials." })
      if (refusals.n > 0) {
        refusals.n--
        const { status, retryAfterS } = refusals
        const body =
          status === 429
            ? { err_code: "TOO_MANY_REQUESTS", err_msg: "Too many requests." }
            : { err_code: "REFUSED", err_msg: `Refused (${status}).` }
        return refuse(status, status === 429 ? "Too Many Requests" : "Refused", body, retryAfterS)
      }
      if (query.encoding !== "mulaw" || query.sample_rate !== String(BYTES_PER_SECOND))
        return refuse(400, "Bad Request", { err_code: "Bad Request", err_msg: "Unsupported encoding or rate." })
      upgrades.push({ headers, query, status: 101 })
      const record: FakeDeepgramConnection = {
        headers,
        query,
        audioBytes: 0,
        binaryMessages: 0,
        controls: [],
        sent: [],
        closed: undefined,
      }
      const stream: Stream = {
        record,
        requestId: randomUUID(),
        ws: undefined,
        uttStart: 0,
        segStart: 0,
        lastInterim: 0,
        said: 0,
        awaiting: [],
        answered: 0,
        idle: undefined,
      }
      res.upgrade(
        stream,
        req.getHeader("sec-websocket-key"),
        req.getHeader("sec-websocket-protocol"),
        req.getHeader("sec-websocket-extensions"),
        context,
      )
    },
    open: (ws) => {
      const s = ws.getUserData()
      s.ws = ws
      streams.add(s)
      connections.push(s.record)
      touch(s)
    },
    message: (ws, message, isBinary) => {
      const s = ws.getUserData()
      if (s.record.closed !== undefined) return
      if (isBinary) heardAudio(s, message.byteLength)
      else heardText(s, Buffer.from(message).toString("utf8"))
    },
    close: (ws, code, message) => {
      const s = ws.getUserData()
      s.ws = undefined
      streams.delete(s)
      clearTimeout(s.idle)
      timers.delete(s.idle!)
      s.record.closed ??= { code, reason: Buffer.from(message).toString("utf8"), by: "client" }
      // Lines a Finalize took but never answered are said again (to the replay on a new stream).
      script.unshift(...s.awaiting.splice(0))
    },
  })

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) =>
    app.listen("127.0.0.1", 0, (socket) =>
      socket ? resolve(socket) : reject(new Error("the fake Deepgram could not listen")),
    ),
  )
  const port = uws.us_socket_local_port(listenSocket)

  return {
    url: `ws://127.0.0.1:${port}`,
    httpUrl: `http://127.0.0.1:${port}`,
    upgrades,
    connections,
    get open() {
      return streams.size
    },
    say(lines) {
      script.push(...lines)
    },
    refuseNext(n, status = 429, retryAfterS) {
      refusals = { n, status, retryAfterS }
    },
    dropNext(o = {}) {
      drop = {
        afterBytes: o.afterBytes ?? 1,
        afterUtterances: o.afterUtterances,
        code: o.code ?? 1011,
        reason: o.reason ?? "NET-0000",
        abrupt: o.abrupt ?? false,
        thenRefuse: o.thenRefuse,
      }
    },
    delayFinalize(ms) {
      finalizeDelayMs = ms
    },
    inject(text) {
      for (const s of streams) {
        const ws = s.ws
        if (ws !== undefined) ws.cork(() => ws.send(text, false))
      }
    },
    async close() {
      for (const t of timers) clearTimeout(t)
      timers.clear()
      uws.us_listen_socket_close(listenSocket)
      for (const s of [...streams]) end(s, 1001, "server shutting down")
      app.close()
    },
  }
}
