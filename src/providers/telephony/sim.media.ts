// The simulated carrier's media stream: once a simulated call is answered, the simulator connects
// to Parley's media-stream WebSocket as a carrier does (<Connect><Stream>: a URL with a single-use
// token, the carrier's message set), plays the agent's audio out in real time (a mark goes back
// when the audio before it has been played; a clear drops what is queued and sends back the marks
// still pending) and sends the callee's side, 20 ms a frame: silence, or a line in the callee's
// voice. Both sides share the process's pacer for the call's time scale (src/platform/pacer.ts).
// Faster than real time the frames due at a wake-up go batched in one message (as some carriers
// batch), and while neither side speaks nothing is sent (discontinuous transmission, as mobile
// networks do), so a simulated call on hold costs nothing; at real time every frame goes.
import { WebSocket } from "undici"
import { FastCounter, FastHistogram } from "../../platform/metrics.js"
import { FRAME_MS, type Pacer } from "../../platform/pacer.js"
import { FRAME_SAMPLES } from "../audio/g711.js"
import {
  carrierConnected,
  carrierMark,
  carrierMedia,
  carrierStart,
  carrierStop,
  MAX_MEDIA_BYTES,
  type OutboundStreamMessage,
} from "./media-stream.messages.js"

/** μ-law silence. */
const SILENCE = new Uint8Array(FRAME_SAMPLES).fill(0xff)
/** The agent's audio a carrier buffers before it stops reading (a minute). */
const MAX_QUEUED_FRAMES = 3000
/** A pause in the agent's audio this long (400 ms) ends its turn (shorter ones fall between sentences). */
const TURN_GAP_FRAMES = 20
/** The most frames one batched message carries (the media message's limit, MAX_MEDIA_BYTES). */
const MAX_BATCH = Math.floor(MAX_MEDIA_BYTES / FRAME_SAMPLES)
/** Silence sent after the callee's line before transmission pauses (the end of speech is heard in it). */
const TRAILING_SILENCE_FRAMES = 60

// What the simulated carrier measures of Parley's side (bench/voice reads them off /metrics).
const clearLatency = new FastHistogram(
  "parley_sim_barge_in_clear_seconds",
  "Simulated carrier: from a callee starting to speak over the agent to Parley's clear arriving",
  [0.05, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 2],
).child()
const agentFrames = new FastCounter(
  "parley_sim_agent_frames_total",
  'Simulated carrier: frames of the agent\'s audio received, by timing ("on_time"; "late": over a frame behind ' +
    "the pace its sentence began at)",
)
const onTime = agentFrames.child({ timing: "on_time" })
const late = agentFrames.child({ timing: "late" })

/** A frame with speech in it: some sample above about -24 dBFS (a μ-law exponent of 4 or more). */
export const loud = (frame: Uint8Array): boolean => {
  for (const b of frame) if ((~b & 0x70) >>> 4 >= 4) return true
  return false
}

interface Waiter {
  readonly done: () => boolean
  readonly resolve: () => void
}

export class SimCalleeStream {
  private readonly ws: WebSocket
  private open = false
  private closed = false
  /** The agent's audio: frames received and played, and the marks to send back when played to them. */
  private received = 0
  private played = 0
  private readonly marks: Array<{ readonly name: string; readonly at: number }> = []
  /** Frames played since the agent's audio last started after a pause, and frames since it last played. */
  private playedInTurn = 0
  private quietFrames = 0
  /** The callee's line being sent, and who waits for its end. */
  private line: readonly Uint8Array[] = []
  private lineAt = 0
  /** The line's first frame with speech in it (flite leads with silence). */
  private lineVoiced = 0
  private lineDone: (() => void) | undefined
  private chunk = 0
  private waiters: Waiter[] = []
  /** When the callee began speaking over the agent (0: not), and where the agent's sentence began. */
  private bargedAt = 0
  private sentenceAt = 0
  private sentenceFrames = 0
  /** Faster than real time: batched frames, and no transmission while both sides are silent. */
  private readonly scaled: boolean
  /** The frames of the tick under way (one array for the stream's life: a tick every 20 ms allocates none). */
  private readonly out: Uint8Array[] = []
  /** Frames since the callee's line ended (silence sent after it). */
  private sinceLine = TRAILING_SILENCE_FRAMES

  constructor(
    url: string,
    private readonly streamSid: string,
    private readonly callSid: string,
    private readonly pacer: Pacer,
    private readonly onEnd: () => void,
    /** Each frame of the agent's audio as it arrives (a test carrier records what it heard). */
    private readonly onAgentAudio?: (mulaw: Uint8Array) => void,
    /** Headers of the upgrade (a carrier's signature; the simulator's streams are not signed). */
    headers?: Readonly<Record<string, string>>,
  ) {
    this.scaled = pacer.frameMs < FRAME_MS
    this.ws = new WebSocket(url, headers === undefined ? undefined : { headers: { ...headers } })
    this.ws.addEventListener("open", () => {
      this.open = true
      this.ws.send(carrierConnected())
      this.ws.send(carrierStart(streamSid, callSid))
      this.pacer.add(this)
    })
    this.ws.addEventListener("message", (e) => this.hear(String(e.data)))
    this.ws.addEventListener("close", () => this.finish())
    this.ws.addEventListener("error", () => this.finish())
  }

  /** True while agent audio waits to be played. */
  get agentSpeaking(): boolean {
    return this.played < this.received
  }

  /** Sends a line of the callee's; resolves when its last frame has gone. */
  speak(frames: readonly Uint8Array[]): Promise<void> {
    if (this.closed) return Promise.resolve()
    this.lineDone?.()
    return new Promise((resolve) => {
      this.line = frames
      this.lineAt = 0
      this.lineVoiced = Math.max(0, frames.findIndex(loud))
      this.lineDone = resolve
    })
  }

  /** Resolves once the agent has been silent for `ms` (played nothing, queued nothing). */
  agentQuietFor(ms: number): Promise<void> {
    const frames = Math.ceil(ms / 20)
    return this.until(() => !this.agentSpeaking && this.quietFrames >= frames)
  }

  /** Resolves once `ms` of the agent's current turn have been played. */
  agentPlayedFor(ms: number): Promise<void> {
    const frames = Math.ceil(ms / 20)
    return this.until(() => this.agentSpeaking && this.playedInTurn >= frames)
  }

  /** Hangs up: the stream stops. */
  stop(): void {
    if (this.closed) return
    if (this.open) {
      try {
        this.ws.send(carrierStop(this.streamSid, this.callSid))
        this.ws.close(1000, "call ended")
      } catch {
        // already closing
      }
    } else this.ws.close()
    this.finish()
  }

  /** `due` 20 ms steps of both sides (the pacer's): false once the stream is over. */
  tick(due: number): boolean {
    if (this.closed) return false
    const out = this.out
    for (let i = 0; i < due && !this.closed; i++) {
      this.step(out)
      if (out.length >= (this.scaled ? MAX_BATCH : 1)) this.flush(out)
    }
    this.flush(out)
    if (this.waiters.length > 0) this.wake()
    return !this.closed
  }

  /** One 20 ms step: the agent's audio played a frame on, marks played go back, the callee's frame out. */
  private step(out: Uint8Array[]): void {
    if (this.played < this.received) {
      this.played++
      this.playedInTurn++
      this.quietFrames = 0
    } else if (++this.quietFrames === TURN_GAP_FRAMES) {
      this.playedInTurn = 0
      this.bargedAt = 0 // the agent finished its turn: nothing was cleared
    }
    while (this.marks.length > 0 && this.marks[0]!.at <= this.played) {
      this.flush(out)
      this.send(carrierMark(this.streamSid, this.marks.shift()!.name))
    }
    const frame = this.line[this.lineAt]
    if (frame !== undefined) {
      if (this.lineAt === this.lineVoiced && this.agentSpeaking) this.bargedAt = performance.now()
      this.lineAt++
      this.sinceLine = 0
    } else this.sinceLine++
    // Faster than real time, silence goes only just after a line (its end is heard in it) or while the agent speaks.
    if (frame !== undefined || !this.scaled || this.sinceLine <= TRAILING_SILENCE_FRAMES || this.agentSpeaking)
      out.push(frame ?? SILENCE)
    else this.chunk++
    if (frame !== undefined && this.lineAt >= this.line.length) {
      this.line = []
      const done = this.lineDone
      this.lineDone = undefined
      done?.()
    }
  }

  /** Sends the frames gathered as one media message. */
  private flush(out: Uint8Array[]): void {
    if (out.length === 0) return
    const payload = out.length === 1 ? out[0]! : Buffer.concat(out)
    this.send(carrierMedia(this.streamSid, payload, this.chunk))
    this.chunk += out.length
    out.length = 0
  }

  private until(done: () => boolean): Promise<void> {
    if (done() || this.closed) return Promise.resolve()
    return new Promise((resolve) => this.waiters.push({ done, resolve }))
  }

  private wake(): void {
    const still: Waiter[] = []
    for (const w of this.waiters) {
      if (w.done() || this.closed) w.resolve()
      else still.push(w)
    }
    this.waiters = still
  }

  private hear(text: string): void {
    let m: OutboundStreamMessage
    try {
      m = JSON.parse(text) as OutboundStreamMessage
    } catch {
      return
    }
    if (m.event === "media") {
      const audio = Buffer.from(m.media.payload, "base64")
      const frames = Math.ceil(audio.length / FRAME_SAMPLES)
      this.received = Math.min(this.played + MAX_QUEUED_FRAMES, this.received + frames)
      this.onAgentAudio?.(audio)
      this.paced(frames)
    } else if (m.event === "mark") {
      this.marks.push({ name: m.mark.name, at: this.received })
      this.sentenceAt = 0
    } else if (m.event === "clear") {
      if (this.bargedAt > 0) clearLatency.observe((performance.now() - this.bargedAt) / 1000)
      this.bargedAt = 0
      this.sentenceAt = 0
      this.played = this.received
      for (const mark of this.marks.splice(0)) this.send(carrierMark(this.streamSid, mark.name))
    }
  }

  /**
   * Counts the agent's frames on time or late against the pace their sentence began at (20 ms a
   * frame at real time): a message's frames are on time when its first is.
   */
  private paced(frames: number): void {
    const now = performance.now()
    const frameMs = this.pacer.frameMs
    if (this.sentenceAt === 0) {
      this.sentenceAt = now
      this.sentenceFrames = frames - 1
      return onTime.inc(frames)
    }
    const due = this.sentenceAt + (this.sentenceFrames + 1) * frameMs
    this.sentenceFrames += frames
    if (now > due + Math.max(frameMs, 1)) late.inc(frames)
    else onTime.inc(frames)
  }

  private send(message: string): void {
    if (!this.open || this.closed) return
    try {
      this.ws.send(message)
    } catch {
      this.finish()
    }
  }

  private finish(): void {
    if (this.closed) return
    this.closed = true
    this.lineDone?.()
    this.lineDone = undefined
    for (const w of this.waiters.splice(0)) w.resolve()
    this.onEnd()
  }
}
