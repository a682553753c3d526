// A local stand-in for ElevenLabs' text-to-speech input-streaming WebSocket (uWebSockets.js on 127.0.0.1:0):
// key, voice and format checks, a predictable tone for each flushed text, every connection recorded, faults on demand.

import { loadUws, type TemplatedApp, type us_listen_socket, type WebSocket } from "../../api/uws.js"
import { encodeSample } from "../../src/providers/audio/g711.js"

export const FAKE_STREAM_PATH = "/v1/text-to-speech/:voice_id/stream-input"

export interface FakeElevenLabsStreamOptions {
  readonly apiKey: string
  readonly voices: readonly string[]
  /** μ-law bytes of tone per character of text (trimmed); default 97 (odd, so chunks never line up with frames). */
  readonly bytesPerChar?: number
  /** Sizes of the audio chunks in bytes, taken in turn; default uneven ones around 1 kB. */
  readonly chunkSizes?: readonly number[]
  /** Between one audio chunk and the next; default 2 ms. */
  readonly chunkGapMs?: number
  /** No text this long after the socket opens or after the last text: error message and close 1008. Default 20 s. */
  readonly inputTimeoutMs?: number
  /** How a wrong key is refused: HTTP 401 on the upgrade (default), or an error message and close 1008. */
  readonly badKey?: "401" | "1008"
}

/** One upgrade asked for, and what happened to it. */
export interface FakeStreamConnection {
  readonly path: string
  readonly voiceId: string
  readonly query: Readonly<Record<string, string>>
  readonly headers: Readonly<Record<string, string>>
  /** 101 when upgraded, else the status answered. */
  readonly status: number
  /** Messages received, parsed (a message that is not JSON is kept as its text). */
  readonly messages: unknown[]
  /** Audio bytes sent. */
  audioBytes: number
  closed: { code: number; reason: string } | undefined
}

export interface FakeElevenLabsStream {
  /** ws://127.0.0.1:<port> */
  readonly url: string
  /** The same server as an API root (http://…), as a byok credential names it. */
  readonly httpUrl: string
  readonly connections: readonly FakeStreamConnection[]
  /** The audio answered to `text` (the fake's tone, as long as the text). */
  audioFor(text: string): Uint8Array
  /** The next `n` upgrades are answered `status` (default 429). */
  refuseNext(n: number, status?: number): void
  /** The next `n` connections are dropped (no close frame) before their first audio, or just after it. */
  dropNext(when: "before_audio" | "after_audio", n?: number): void
  /** The next `n` connections hold their first audio back for `ms`. */
  delayFirstAudio(ms: number, n?: number): void
  /** The next `n` connections answer with a message that is not JSON instead of audio. */
  garbleNext(n?: number): void
  close(): void
}

interface Faults {
  drop?: "before_audio" | "after_audio"
  delayMs?: number
  garble?: boolean
}

interface Conn {
  readonly record: FakeStreamConnection
  readonly known: boolean
  readonly keyOk: boolean
  readonly faults: Faults
  ws?: WebSocket<Conn>
  open: boolean
  buffered: string
  /** Texts flushed and waiting for their audio, and whether the input has ended. */
  readonly queue: string[]
  speaking: boolean
  ended: boolean
  sample: number
  chunks: number
  readonly timers: Set<NodeJS.Timeout>
  inputTimer?: NodeJS.Timeout
}

/** Uneven chunk sizes (bytes), taken in turn. */
const CHUNK_SIZES = [1111, 389, 2753, 97, 1601, 523]
const TONE_HZ = 330

export async function startFakeElevenLabsStream(opts: FakeElevenLabsStreamOptions): Promise<FakeElevenLabsStream> {
  const uws = loadUws()
  const app: TemplatedApp = uws.App()
  // The catalogue's live check of a byok credential (GET {api_base_url}/v1/user, xi-api-key): 200 for the
  // fake's key, 401 otherwise.
  app.get("/v1/user", (res, req) => {
    const ok = req.getHeader("xi-api-key") === opts.apiKey
    res.writeStatus(ok ? "200 OK" : "401 Unauthorized").end(JSON.stringify(ok ? { ok: true } : { error: "bad key" }))
  })
  const bytesPerChar = opts.bytesPerChar ?? 97
  const gapMs = opts.chunkGapMs ?? 2
  const chunkSizes = opts.chunkSizes ?? CHUNK_SIZES
  const inputTimeoutMs = opts.inputTimeoutMs ?? 20_000
  const voices = new Set(opts.voices)
  const connections: FakeStreamConnection[] = []
  const live = new Set<Conn>()
  let refusals: { n: number; status: number } = { n: 0, status: 429 }
  const pending: Array<{ n: number; faults: Faults }> = []

  const takeFaults = (): Faults => {
    const faults: Faults = {}
    for (const p of pending) {
      if (p.n <= 0) continue
      Object.assign(faults, p.faults)
      p.n--
    }
    return faults
  }

  const later = (c: Conn, ms: number, f: () => void) => {
    const t = setTimeout(() => {
      c.timers.delete(t)
      if (c.open) f()
    }, ms)
    c.timers.add(t)
  }

  /** Sent at once (corked, so a drop that follows cannot discard it). */
  const send = (c: Conn, m: unknown) => {
    const ws = c.ws
    if (c.open && ws !== undefined) ws.cork(() => ws.send(typeof m === "string" ? m : JSON.stringify(m), false))
  }

  /** The vendor's error message, then its close. */
  const refuse = (c: Conn, error: string, message: string) => {
    send(c, { message, error, code: 1008 })
    if (c.open) c.ws!.end(1008, error)
  }

  const armInputTimeout = (c: Conn) => {
    clearTimeout(c.inputTimer)
    if (c.ended) return
    c.inputTimer = setTimeout(() => {
      if (!c.open) return
      const s = inputTimeoutMs / 1000
      refuse(
        c,
        "input_timeout_exceeded",
        `Have not received a new text input within the timeout of ${s} seconds. Streaming input terminated. ` +
          "Please make sure to either feed the input in the timely manner, " +
          'or to send the end of input text (empty string "") when done.',
      )
    }, inputTimeoutMs)
  }

  const tone = (from: number, length: number): Uint8Array => {
    const out = new Uint8Array(length)
    for (let i = 0; i < length; i++) out[i] = encodeSample(8000 * Math.sin((2 * Math.PI * TONE_HZ * (from + i)) / 8000))
    return out
  }

  const audioFor = (text: string): Uint8Array => tone(0, [...text.trim()].length * bytesPerChar)

  /** Speaks the queue's texts one after the other; once the input has ended and all is said, isFinal and close. */
  const speak = (c: Conn) => {
    if (c.speaking || !c.open) return
    const text = c.queue.shift()
    if (text === undefined) {
      if (c.ended) {
        send(c, { audio: null, isFinal: true, normalizedAlignment: null, alignment: null })
        c.ws!.end(1000, "")
      }
      return
    }
    c.speaking = true
    const chars = [...text.trim()]
    const audio = tone(c.sample, chars.length * bytesPerChar)
    c.sample += audio.length
    let at = 0
    const next = () => {
      if (at >= audio.length) {
        c.speaking = false
        return speak(c)
      }
      const first = c.chunks === 0
      const size = chunkSizes[c.chunks++ % chunkSizes.length]!
      const chunk = audio.subarray(at, at + size)
      const alignment = first
        ? {
            chars,
            charStartTimesMs: chars.map((_, i) => Math.round((i * bytesPerChar) / 8)),
            charDurationsMs: chars.map(() => Math.round(bytesPerChar / 8)),
          }
        : null
      if (c.faults.garble) {
        send(c, "<html>502 Bad Gateway</html>")
        return
      }
      send(c, {
        audio: Buffer.from(chunk).toString("base64"),
        isFinal: false,
        normalizedAlignment: alignment,
        alignment,
      })
      c.record.audioBytes += chunk.length
      at += chunk.length
      // Dropped once the chunk has left (a moment later, so it is not lost with the socket).
      if (first && c.faults.drop === "after_audio") return later(c, 20, () => c.ws!.close())
      later(c, gapMs, next)
    }
    if (c.faults.drop === "before_audio") return void c.ws!.close()
    if (c.chunks === 0 && c.faults.delayMs !== undefined) later(c, c.faults.delayMs, next)
    else next()
  }

  const hear = (c: Conn, raw: string) => {
    let m: unknown
    try {
      m = JSON.parse(raw)
    } catch {
      m = raw
    }
    c.record.messages.push(m)
    const msg = typeof m === "object" && m !== null ? (m as Record<string, unknown>) : undefined
    if (msg === undefined || typeof msg.text !== "string")
      return refuse(
        c,
        "invalid_input_message",
        "Could not parse input message, make sure it is a json and follows the schema outlined in protocol.",
      )
    if (c.record.messages.length === 1) {
      if (!c.keyOk) return refuse(c, "invalid_api_key", "Invalid API key")
      if (!c.known) return refuse(c, "voice_not_found", `A voice with voice_id '${c.record.voiceId}' was not found.`)
      if (msg.text !== " ") return refuse(c, "invalid_input_message", 'The first message must have the text " ".')
      return armInputTimeout(c)
    }
    if (msg.text === "") {
      c.ended = true
      clearTimeout(c.inputTimer)
      if (c.buffered.trim() !== "") c.queue.push(c.buffered)
      c.buffered = ""
      return speak(c)
    }
    c.buffered += msg.text
    armInputTimeout(c)
    if (msg.flush === true || msg.try_trigger_generation === true) {
      c.queue.push(c.buffered)
      c.buffered = ""
      speak(c)
    }
  }

  app.ws<Conn>(FAKE_STREAM_PATH, {
    maxPayloadLength: 64 * 1024,
    upgrade: (res, req, context) => {
      // req is valid only now: copy what is kept.
      const headers: Record<string, string> = {}
      req.forEach((k, v) => {
        headers[k] = v
      })
      const voiceId = decodeURIComponent(req.getParameter(0) ?? "")
      const query = Object.fromEntries(new URLSearchParams(req.getQuery() ?? ""))
      const path = req.getUrl()
      const answer = (status: number, line: string, body: unknown) => {
        connections.push({ path, voiceId, query, headers, status, messages: [], audioBytes: 0, closed: undefined })
        res.writeStatus(line).writeHeader("Content-Type", "application/json").end(JSON.stringify(body), true)
      }
      if (refusals.n > 0) {
        refusals.n--
        const status = refusals.status
        const detail = { status: "too_many_concurrent_requests", message: "Too many concurrent requests." }
        return answer(status, `${status} ${status === 429 ? "Too Many Requests" : "Refused"}`, { detail })
      }
      const keyOk = headers["xi-api-key"] === opts.apiKey
      if (!keyOk && (opts.badKey ?? "401") === "401")
        return answer(401, "401 Unauthorized", { detail: { status: "invalid_api_key", message: "Invalid API key" } })
      if (query.output_format !== "ulaw_8000")
        return answer(400, "400 Bad Request", {
          detail: { status: "invalid_output_format", message: "This fake speaks ulaw_8000 only." },
        })
      const record: FakeStreamConnection = {
        path,
        voiceId,
        query,
        headers,
        status: 101,
        messages: [],
        audioBytes: 0,
        closed: undefined,
      }
      connections.push(record)
      const conn: Conn = {
        record,
        known: voices.has(voiceId),
        keyOk,
        faults: takeFaults(),
        open: false,
        buffered: "",
        queue: [],
        speaking: false,
        ended: false,
        sample: 0,
        chunks: 0,
        timers: new Set(),
      }
      res.upgrade(
        conn,
        headers["sec-websocket-key"] ?? "",
        headers["sec-websocket-protocol"] ?? "",
        headers["sec-websocket-extensions"] ?? "",
        context,
      )
    },
    open: (ws) => {
      const c = ws.getUserData()
      c.ws = ws
      c.open = true
      live.add(c)
      armInputTimeout(c)
    },
    message: (ws, message) => {
      const c = ws.getUserData()
      if (c.open) hear(c, Buffer.from(message).toString("utf8"))
    },
    close: (ws, code, message) => {
      const c = ws.getUserData()
      c.open = false
      live.delete(c)
      clearTimeout(c.inputTimer)
      for (const t of c.timers) clearTimeout(t)
      c.record.closed = { code, reason: Buffer.from(message).toString("utf8") }
    },
  })
  app.any("/*", (res) => {
    res.writeStatus("404 Not Found").end("", true)
  })

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) =>
    app.listen("127.0.0.1", 0, (s) => (s ? resolve(s) : reject(new Error("the fake could not listen")))),
  )
  const port = uws.us_socket_local_port(listenSocket)

  return {
    url: `ws://127.0.0.1:${port}`,
    httpUrl: `http://127.0.0.1:${port}`,
    connections,
    audioFor,
    refuseNext: (n, status = 429) => {
      refusals = { n, status }
    },
    dropNext: (when, n = 1) => void pending.push({ n, faults: { drop: when } }),
    delayFirstAudio: (ms, n = 1) => void pending.push({ n, faults: { delayMs: ms } }),
    garbleNext: (n = 1) => void pending.push({ n, faults: { garble: true } }),
    close: () => {
      uws.us_listen_socket_close(listenSocket)
      for (const c of [...live]) c.ws?.close()
      app.close()
    },
  }
}
