// The recording worker thread: holds the Opus encoders of every call being recorded in the process
// and turns their time-aligned μ-law slots into two Ogg Opus files. Started by recording-encoder.ts.
import { parentPort, workerData } from "node:worker_threads"
import OpusScript from "opusscript"
import { decode, FRAME_SAMPLES, PHONE_RATE } from "./g711.js"
import { OggOpusWriter } from "./ogg-opus.js"

/** The worker's workerData: the thread serves only when started as this worker (never when imported). */
export const RECORDING_WORKER = "parley-recording-encoder"

export interface OpusSettings {
  readonly channels: 1 | 2
  readonly bitrate: number
  readonly complexity: number
}

/** For listening: both sides summed. */
export const MIXED: OpusSettings = { channels: 1, bitrate: 16_000, complexity: 3 }
/**
 * For review and analysis: left the callee, right the agent. Complexity 0 measured as good as 3 or 10
 * and 32 kbps no better than 24 at 8 kHz (SILK's narrowband ceiling); one side never leaks into the other.
 */
export const SIDES: OpusSettings = { channels: 2, bitrate: 24_000, complexity: 0 }

/** The longest call (a rule book's max_call_seconds, 1800) and a minute's margin, in 20 ms slots. */
export const MAX_TAKE_SLOTS = 31 * 60 * 50
/**
 * A take's encoded bytes, both files: 1860 s at 40 kbps is 9.3 MB (speech measured at the nominal rates,
 * Ogg pages included), so this leaves half as much again for VBR. Past either cap the take stops growing
 * and ends validly.
 */
export const MAX_TAKE_BYTES = 14 * 2 ** 20

const OPUS_SET_COMPLEXITY = 4010
/** 48 kHz samples per 20 ms packet. */
const PACKET_SAMPLES_48 = 960
/** The largest Opus packet of one frame, and room for the pages around the last ones. */
const MAX_PACKET = 1275
const RESERVE = 4 * MAX_PACKET + 4096
const SILENCE_PCM = new Int16Array(FRAME_SAMPLES)

const serial = (): number => crypto.getRandomValues(new Uint32Array(1))[0]!

class Track {
  private readonly encoder: OpusScript
  readonly ogg: OggOpusWriter
  /** One frame of interleaved samples, and the same bytes as the Buffer the encoder reads. */
  readonly pcm: Int16Array
  private readonly input: Buffer
  private freed = false

  constructor(readonly settings: OpusSettings) {
    this.encoder = new OpusScript(PHONE_RATE, settings.channels, OpusScript.Application.VOIP)
    try {
      this.encoder.setBitrate(settings.bitrate)
      this.encoder.encoderCTL(OPUS_SET_COMPLEXITY, settings.complexity)
    } catch (err) {
      this.free()
      throw err
    }
    this.ogg = new OggOpusWriter({ channels: settings.channels, serial: serial(), inputRate: PHONE_RATE })
    this.pcm = new Int16Array(FRAME_SAMPLES * settings.channels)
    this.input = Buffer.from(this.pcm.buffer, this.pcm.byteOffset, this.pcm.byteLength)
  }

  /** Encodes the frame in `pcm`. */
  encode(): void {
    // The encoder hands back a copy of its output: the writer may keep it.
    this.ogg.add(this.encoder.encode(this.input, FRAME_SAMPLES), PACKET_SAMPLES_48)
  }

  free(): void {
    if (this.freed) return
    this.freed = true
    this.encoder.delete()
  }
}

export interface EncodedTake {
  readonly mixed: Uint8Array
  readonly sides: Uint8Array
  readonly durationMs: number
  /** Whether a cap stopped the take before its last slot. */
  readonly capped: boolean
}

/**
 * One call's recording as it is being encoded: slots are encoded as they come, a gap before a
 * slot filled with silence and a slot already encoded skipped. Its encoders live in wasm memory:
 * finish() or free() releases them.
 */
export class TakeEncoder {
  private readonly mixed: Track
  private readonly sides: Track
  /** The slot due next; undefined until the first push. */
  private next: number | undefined
  /** Slots encoded. */
  slots = 0
  capped = false
  private readonly callee = new Int16Array(FRAME_SAMPLES)
  private readonly agent = new Int16Array(FRAME_SAMPLES)

  constructor(
    private readonly maxSlots = MAX_TAKE_SLOTS,
    private readonly maxBytes = MAX_TAKE_BYTES,
  ) {
    this.mixed = new Track(MIXED)
    try {
      this.sides = new Track(SIDES)
    } catch (err) {
      this.mixed.free()
      throw err
    }
  }

  get bytes(): number {
    return this.mixed.ogg.bytes + this.sides.ogg.bytes
  }

  /** `count` slots from slot `from`: each side's `count` × 160 μ-law bytes. */
  push(from: number, count: number, callee: Uint8Array, agent: Uint8Array): void {
    this.next ??= from
    for (; this.next < from && !this.capped; this.next++) this.encode(SILENCE_PCM, SILENCE_PCM)
    for (let i = this.next - from; i < count && !this.capped; i++, this.next++) {
      const at = i * FRAME_SAMPLES
      decode(callee.subarray(at, at + FRAME_SAMPLES), this.callee)
      decode(agent.subarray(at, at + FRAME_SAMPLES), this.agent)
      this.encode(this.callee, this.agent)
    }
  }

  private encode(callee: Int16Array, agent: Int16Array): void {
    if (this.slots >= this.maxSlots || this.bytes + RESERVE > this.maxBytes) {
      this.capped = true
      return
    }
    const mono = this.mixed.pcm
    const stereo = this.sides.pcm
    for (let i = 0; i < FRAME_SAMPLES; i++) {
      const c = callee[i]!
      const a = agent[i]!
      const sum = c + a
      mono[i] = Math.min(32_767, Math.max(-32_768, sum))
      stereo[2 * i] = c
      stereo[2 * i + 1] = a
    }
    this.mixed.encode()
    this.sides.encode()
    this.slots++
  }

  /** Both files, the encoders released. */
  finish(): EncodedTake {
    try {
      // One more frame of silence flushes the encoder's lookahead (6.5 ms); the last granule trims it off.
      for (const track of [this.mixed, this.sides]) {
        track.pcm.fill(0)
        track.encode()
      }
      const playable48 = this.slots * PACKET_SAMPLES_48
      return {
        mixed: this.mixed.ogg.end(playable48),
        sides: this.sides.ogg.end(playable48),
        durationMs: this.slots * 20,
        capped: this.capped,
      }
    } finally {
      this.free()
    }
  }

  free(): void {
    this.mixed.free()
    this.sides.free()
  }
}

export type ToWorker =
  | { readonly t: "open"; readonly id: number }
  /** `audio`: the callee's count × 160 bytes, then the agent's. */
  | {
      readonly t: "push"
      readonly id: number
      readonly from: number
      readonly count: number
      readonly audio: Uint8Array
    }
  | { readonly t: "finish"; readonly id: number }
  | { readonly t: "abort"; readonly id: number }

export type FromWorker =
  | ({ readonly t: "done"; readonly id: number } & EncodedTake)
  | { readonly t: "failed"; readonly id: number; readonly message: string }
  /** Bytes of pushed audio encoded since the last ack: the sender's backlog shrinks by them. */
  | { readonly t: "ack"; readonly bytes: number }

const port = parentPort
if (port !== null && workerData === RECORDING_WORKER) {
  const takes = new Map<number, TakeEncoder>()
  let encoded = 0
  let ackDue = false
  const ack = () => {
    ackDue = false
    const message: FromWorker = { t: "ack", bytes: encoded }
    encoded = 0
    port.postMessage(message)
  }
  const failed = (id: number, err: unknown) => {
    takes.get(id)?.free()
    takes.delete(id)
    const message: FromWorker = { t: "failed", id, message: err instanceof Error ? err.message : String(err) }
    port.postMessage(message)
  }

  port.on("message", (msg: ToWorker) => {
    switch (msg.t) {
      case "open":
        try {
          takes.set(msg.id, new TakeEncoder())
        } catch (err) {
          failed(msg.id, err)
        }
        return
      case "push": {
        // One ack per turn of this thread's loop, however many pushes it took.
        encoded += msg.audio.byteLength
        if (!ackDue) {
          ackDue = true
          setImmediate(ack)
        }
        const take = takes.get(msg.id)
        if (take === undefined) return
        const half = msg.count * FRAME_SAMPLES
        try {
          take.push(msg.from, msg.count, msg.audio.subarray(0, half), msg.audio.subarray(half, 2 * half))
        } catch (err) {
          failed(msg.id, err)
        }
        return
      }
      case "finish": {
        const take = takes.get(msg.id)
        if (take === undefined) return
        takes.delete(msg.id)
        try {
          const done = take.finish()
          const message: FromWorker = { t: "done", id: msg.id, ...done }
          port.postMessage(message, [done.mixed.buffer as ArrayBuffer, done.sides.buffer as ArrayBuffer])
        } catch (err) {
          failed(msg.id, err)
        }
        return
      }
      case "abort":
        takes.get(msg.id)?.free()
        takes.delete(msg.id)
        return
    }
  })
}
