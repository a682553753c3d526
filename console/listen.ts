// Listening in on a live call (GET /api/calls/{id}/listen): the call's mixed audio as server-sent
// events of 8 kHz μ-law, decoded by a table and played through Web Audio a little behind the call.
import { type ApiError, streamRefusal } from "./api.js"

/** Samples a second of the call's audio. */
const RATE = 8_000
/** How far ahead of the audio clock a chunk starts after a gap: room for the next to arrive in time. */
const LEAD_S = 0.15
/**
 * The most audio queued ahead of what is heard: past it the oldest of a chunk is dropped. The server
 * sends each sample 100–200 ms after it was spoken, so what is heard stays under 500 ms behind the call.
 */
const MAX_QUEUED_S = 0.3

/** μ-law byte → linear sample in [-1, 1] (ITU-T G.711: bias 0x84, the byte inverted). */
const ULAW = new Float32Array(256)
for (let b = 0; b < 256; b++) {
  const u = ~b & 0xff
  const magnitude = ((((u & 0x0f) << 3) + 0x84) << ((u >> 4) & 0x07)) - 0x84
  ULAW[b] = (u & 0x80 ? -magnitude : magnitude) / 32_768
}

/** The base64 of an audio event, decoded straight to samples. */
function samplesOf(base64: string): Float32Array<ArrayBuffer> {
  const bytes = atob(base64)
  const out = new Float32Array(bytes.length)
  for (let i = 0; i < bytes.length; i++) out[i] = ULAW[bytes.charCodeAt(i) & 0xff]!
  return out
}

export type ListenState = "connecting" | "playing" | "reconnecting" | "ended" | "stopped" | "failed"

export interface ListenStatus {
  readonly state: ListenState
  /** Samples that arrived and were decoded. */
  readonly decoded: number
  /** Samples handed to the audio graph (decoded, minus those dropped to stay close behind the call). */
  readonly played: number
  /** Why it failed, in words, when the server said. */
  readonly error: ApiError | undefined
}

export interface Listening {
  readonly status: ListenStatus
  /** Called after every change of status (at most once per event). */
  onChange(cb: (s: ListenStatus) => void): void
  /** Closes the stream and the audio graph; what was queued stops at once. */
  stop(): void
}

/**
 * Starts listening to a call. Call it from the click that asks for it: browsers let an AudioContext
 * play only after a user gesture.
 */
export function listenTo(callId: number): Listening {
  const path = `/api/calls/${callId}/listen`
  const ctx = new AudioContext({ latencyHint: "interactive" })
  void ctx.resume()
  let status: ListenStatus = { state: "connecting", decoded: 0, played: 0, error: undefined }
  let listener: ((s: ListenStatus) => void) | undefined
  const set = (change: Partial<ListenStatus>) => {
    status = { ...status, ...change }
    listener?.(status)
  }
  // Where the next chunk starts on the audio clock.
  let next = 0
  let done = false

  const play = (samples: Float32Array<ArrayBuffer>) => {
    const now = ctx.currentTime
    if (next < now + LEAD_S / 2) next = now + LEAD_S
    // Keep only what fits before MAX_QUEUED_S: the newest samples, so what is heard stays close to the call.
    const room = Math.floor((now + MAX_QUEUED_S - next) * RATE)
    const keep = Math.min(samples.length, Math.max(0, room))
    if (keep > 0) {
      const buffer = ctx.createBuffer(1, keep, RATE)
      buffer.copyToChannel(samples.subarray(samples.length - keep), 0)
      const node = ctx.createBufferSource()
      node.buffer = buffer
      node.connect(ctx.destination)
      node.start(next)
      next += keep / RATE
    }
    set({ state: "playing", decoded: status.decoded + samples.length, played: status.played + keep })
  }

  const source = new EventSource(path)
  source.addEventListener("audio", (e) => {
    if (done) return
    let ulaw: unknown
    try {
      ulaw = (JSON.parse((e as MessageEvent<string>).data) as { ulaw?: unknown }).ulaw
    } catch {
      return
    }
    if (typeof ulaw === "string") play(samplesOf(ulaw))
  })
  const finish = (state: "ended" | "stopped" | "failed", error?: ApiError) => {
    if (done) return
    done = true
    source.close()
    // An ended call's last audio plays out; stopping is at once.
    const tail = state === "ended" ? Math.max(0, next - ctx.currentTime) : 0
    setTimeout(() => void ctx.close().catch(() => undefined), tail * 1000)
    set({ state, error })
  }
  source.addEventListener("end", () => finish("ended"))
  source.onerror = () => {
    if (done) return
    // Ended by the server (a role change, a restart): the browser reconnects by itself. Refused (the
    // session is over, the call ended, too many listeners): ask why; a 401 sends the app to sign-in.
    if (source.readyState !== EventSource.CLOSED) return set({ state: "reconnecting" })
    source.close()
    streamRefusal(path).then((e) => finish("failed", e))
  }
  source.onopen = () => {
    if (!done && status.state !== "playing") set({ state: "connecting" })
  }

  return {
    get status() {
      return status
    },
    onChange(cb) {
      listener = cb
    },
    stop: () => finish("stopped"),
  }
}
