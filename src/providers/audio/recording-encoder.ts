// A call's recording, compressed off the event loop: the two sides' time-aligned slots (two-track.ts)
// go to one worker thread per process (recording-encoder.worker.ts), which hands back two Ogg Opus files.
import { Worker } from "node:worker_threads"
import { workerEntry } from "../../platform/worker-entry.js"
import { FRAME_SAMPLES } from "./g711.js"
import { type FromWorker, RECORDING_WORKER, type ToWorker } from "./recording-encoder.worker.js"
import type { TrackSlots } from "./two-track.js"

export interface RecordingParts {
  readonly mixed: Uint8Array
  readonly sides: Uint8Array
  readonly durationMs: number
}

export interface RecordingTake {
  /**
   * Time-aligned slots of both sides (TrackSlots from two-track.ts); copied/transferred to the worker,
   * never blocking.
   */
  push(slots: TrackSlots): void
  /**
   * Ends the take: the two Ogg Opus files — `mixed` mono (both sides summed, for listening), `sides`
   * stereo (left the callee, right the agent). Resolves once encoded; rejects on a worker failure.
   */
  finish(): Promise<RecordingParts>
  /** Drops the take without encoding the rest (the call's recording is not kept). */
  abort(): void
}

export interface RecordingEncoder {
  /** A new take; throws RecordingEncoderBusy past `maxTakes` open at once, and once closed. */
  open(): RecordingTake
  /** Rejects the takes still open, waits for those finishing, and stops the worker. */
  close(): Promise<void>
  /** Takes opened and not yet finished, aborted or failed. */
  readonly takes: number
}

/** Refused: the encoder already holds its most takes, or is closed. The call goes unrecorded. */
export class RecordingEncoderBusy extends Error {
  override readonly name = "RecordingEncoderBusy"
}

/**
 * Takes open at once by default. The worker spends ~6.7 ms of one core per second of a take (Opus
 * mono at complexity 3 and stereo at 0, bench/recording-codec.ts): 96 takes hold ~65% of that core.
 */
export const DEFAULT_MAX_TAKES = 96
/**
 * Pushed audio the worker has not yet encoded, across takes: 8 MiB is ~500 call-seconds, several
 * seconds behind at full load. Slots past it are dropped (the take hears silence there), so a stalled
 * worker never grows the process's memory without bound.
 */
const MAX_BACKLOG_BYTES = 8 * 2 ** 20

type TakeState = "open" | "finishing" | "settled"

interface Take {
  readonly id: number
  readonly worker: Worker
  state: TakeState
  /** Why the take cannot finish (its worker died, or the encoder closed), once known. */
  failure: Error | undefined
  result: Promise<RecordingParts> | undefined
  resolve: (parts: RecordingParts) => void
  reject: (err: Error) => void
}

/** Each encoder's worker, for tests and diagnostics (a test stops it to see takes fail and the next one recover). */
const workers = new WeakMap<RecordingEncoder, () => Worker | undefined>()
export const recordingWorkerOf = (encoder: RecordingEncoder): Worker | undefined => workers.get(encoder)?.()

class Encoder implements RecordingEncoder {
  private worker: Worker | undefined
  /** The worker's uncaught error, reported with the takes it took down. */
  private workerError: unknown
  private readonly open_ = new Map<number, Take>()
  private readonly entry = workerEntry(import.meta.url, "recording-encoder")
  private nextId = 1
  private backlog = 0
  private finishing = 0
  private closed = false
  /** Slots dropped because the worker was too far behind. */
  dropped = 0

  constructor(private readonly maxTakes: number) {}

  get takes(): number {
    return this.open_.size
  }

  currentWorker(): Worker | undefined {
    return this.worker
  }

  open(): RecordingTake {
    if (this.closed) throw new RecordingEncoderBusy("the recording encoder is closed")
    if (this.open_.size >= this.maxTakes)
      throw new RecordingEncoderBusy(`${this.open_.size} recordings are already being encoded`)
    const worker = this.worker ?? this.spawn()
    const take: Take = {
      id: this.nextId++,
      worker,
      state: "open",
      failure: undefined,
      result: undefined,
      resolve: () => {},
      reject: () => {},
    }
    this.open_.set(take.id, take)
    this.post(take, { t: "open", id: take.id })
    return {
      push: (slots) => this.push(take, slots),
      finish: () => this.finish(take),
      abort: () => this.abort(take),
    }
  }

  async close(): Promise<void> {
    this.closed = true
    const finishing: Promise<unknown>[] = []
    for (const take of [...this.open_.values()]) {
      if (take.state === "finishing" && take.result !== undefined) finishing.push(take.result)
      else this.fail(take, new Error("the recording encoder is closed"), true)
    }
    await Promise.allSettled(finishing)
    await this.worker?.terminate()
  }

  private spawn(): Worker {
    const worker = new Worker(this.entry.target, {
      ...this.entry.options,
      name: "parley-recording",
      workerData: RECORDING_WORKER,
    })
    // An open take does not hold the process open; a finishing one does (ref'd while any finishes).
    worker.unref()
    this.worker = worker
    this.workerError = undefined
    this.backlog = 0
    worker.on("message", (msg: FromWorker) => this.received(msg))
    worker.on("error", (err) => {
      this.workerError = err
    })
    worker.on("messageerror", (err) => {
      this.workerError = err
      void worker.terminate()
    })
    worker.once("exit", (code) => this.exited(worker, code))
    return worker
  }

  private post(take: Take, msg: ToWorker, transfer: ArrayBuffer[] = []): void {
    take.worker.postMessage(msg, transfer)
  }

  private push(take: Take, slots: TrackSlots): void {
    const bytes = slots.count * FRAME_SAMPLES
    if (slots.callee.length !== bytes || slots.agent.length !== bytes)
      throw new RangeError(`${slots.count} slots need ${bytes} bytes a side`)
    if (take.state !== "open" || slots.count === 0) return
    if (this.backlog + 2 * bytes > MAX_BACKLOG_BYTES) {
      this.dropped += slots.count
      return
    }
    // One copy of both sides, handed over: the caller keeps its arrays (a listener may be reading them).
    const audio = new Uint8Array(2 * bytes)
    audio.set(slots.callee)
    audio.set(slots.agent, bytes)
    this.backlog += audio.byteLength
    this.post(take, { t: "push", id: take.id, from: slots.from, count: slots.count, audio }, [audio.buffer])
  }

  private finish(take: Take): Promise<RecordingParts> {
    if (take.result !== undefined) return take.result
    if (take.failure !== undefined) return Promise.reject(take.failure)
    if (take.state !== "open") return Promise.reject(new Error("the recording was aborted"))
    take.result = new Promise<RecordingParts>((resolve, reject) => {
      take.resolve = resolve
      take.reject = reject
    })
    take.state = "finishing"
    if (this.finishing++ === 0) take.worker.ref()
    this.post(take, { t: "finish", id: take.id })
    return take.result
  }

  private abort(take: Take): void {
    if (take.state !== "open") return
    this.settle(take)
    take.failure = new Error("the recording was aborted")
    this.post(take, { t: "abort", id: take.id })
  }

  private settle(take: Take): void {
    if (take.state === "finishing" && --this.finishing === 0) take.worker.unref()
    take.state = "settled"
    this.open_.delete(take.id)
  }

  /** A take that cannot finish: its finish() rejects now, or when it is called. */
  private fail(take: Take, err: Error, tellWorker = false): void {
    if (take.state === "settled") return
    const wasFinishing = take.state === "finishing"
    this.settle(take)
    take.failure = err
    if (wasFinishing) take.reject(err)
    if (tellWorker && take.worker === this.worker) this.post(take, { t: "abort", id: take.id })
  }

  private received(msg: FromWorker): void {
    if (msg.t === "ack") {
      this.backlog = Math.max(0, this.backlog - msg.bytes)
      return
    }
    const take = this.open_.get(msg.id)
    if (take === undefined) return
    if (msg.t === "failed") return this.fail(take, new Error(`the recording failed: ${msg.message}`))
    if (take.state !== "finishing") return
    this.settle(take)
    take.resolve({ mixed: msg.mixed, sides: msg.sides, durationMs: msg.durationMs })
  }

  private exited(worker: Worker, code: number): void {
    if (this.worker !== worker) return
    this.worker = undefined
    this.backlog = 0
    const why = this.closed
      ? "the recording encoder is closed"
      : `the recording worker exited (code ${code})` +
        `${this.workerError instanceof Error ? `: ${this.workerError.message}` : ""}`
    for (const take of [...this.open_.values()])
      if (take.worker === worker) this.fail(take, new Error(why, { cause: this.workerError }))
  }
}

/** The process's recording encoder; its worker starts with the first take and stops with close(). */
export function makeRecordingEncoder(o: { maxTakes?: number } = {}): RecordingEncoder {
  const maxTakes = o.maxTakes ?? DEFAULT_MAX_TAKES
  if (!Number.isSafeInteger(maxTakes) || maxTakes < 1)
    throw new RangeError(`maxTakes must be a positive integer, got ${maxTakes}`)
  const encoder = new Encoder(maxTakes)
  workers.set(encoder, () => encoder.currentWorker())
  return encoder
}
