// The offline speech simulator as a SpeechProvider: requests are checked here and rendered by a
// small pool of worker threads (sim.worker.ts), since one eSpeak run blocks its thread 200–400 ms.
// It "clones" a voice by measuring the sample (clone.analysis.ts): the voice is those parameters.
import { availableParallelism } from "node:os"
import { Worker } from "node:worker_threads"
import { workerEntry } from "../../platform/worker-entry.js"
import { deriveVoiceParams } from "./clone.analysis.js"
import { type PreparedSpeech, prepareSpeech } from "./sim.engine.js"
import type { WorkerJob, WorkerResult } from "./sim.worker.js"
import {
  type ClonedVoice,
  type SpeechErrorCode,
  type SpeechPriority,
  type SpeechProvider,
  type SpeechRequest,
  SpeechSynthesisError,
  type SynthesizedAudio,
  type VoiceSample,
} from "./speech.interface.js"

export interface SimSpeechOptions {
  /** Worker threads; default min(2, cores − 1), at least 1: synthesis must not starve the API. */
  readonly workers?: number
  /** Requests that may wait for a busy worker; beyond it synthesize() rejects with BUSY. Default 64. */
  readonly maxQueue?: number
  /**
   * How many of those places `low` priority requests may hold; default half of maxQueue (rounded
   * down), so normal requests always have the other half however many low ones arrive.
   */
  readonly maxLowQueue?: number
  /** A job running longer than this stops its worker and rejects with ENGINE_FAILURE. Default 30 s. */
  readonly jobTimeoutMs?: number
  /**
   * A worker left idle this long is stopped, and the next synthesis starts one again (a few hundred
   * ms): each worker's engine holds ~100 MB. Default 60 s; 0 keeps workers for the process's life.
   */
  readonly idleMs?: number
}

export const DEFAULT_MAX_QUEUE = 64
const DEFAULT_JOB_TIMEOUT_MS = 30_000
const DEFAULT_IDLE_MS = 60_000

const defaultWorkers = (): number => Math.max(1, Math.min(2, availableParallelism() - 1))

const CODES: ReadonlySet<SpeechErrorCode> = new Set([
  "TEXT_TOO_LONG",
  "EMPTY_TEXT",
  "UNSUPPORTED_VOICE",
  "ENGINE_FAILURE",
  "BUSY",
  "BAD_SAMPLE",
])

interface Job {
  readonly id: number
  readonly prepared: PreparedSpeech
  readonly resolve: (clip: SynthesizedAudio) => void
  readonly reject: (err: SpeechSynthesisError) => void
}

interface Slot {
  readonly worker: Worker
  job: Job | undefined
  timer: NodeJS.Timeout | undefined
  /** Stops the worker when it has been idle for idleMs. */
  idle: NodeJS.Timeout | undefined
  timedOut: boolean
  /** The worker's uncaught error, reported with the job it took down. */
  error: unknown
}

/**
 * Runs prepared requests on up to `size` workers, one job per worker at a time. Workers start on
 * demand and stay (their engine warm) for `idleMs` after their last job, unreferenced so they
 * never keep the process alive. A worker that dies or overruns is dropped, its job rejected, and
 * replaced when needed.
 * Two queues: a free worker takes the oldest normal job before any low one, and low jobs may
 * hold at most `maxLowQueue` of the `maxQueue` places.
 */
class WorkerPool {
  private readonly slots: Slot[] = []
  private readonly queue: Job[] = []
  private readonly lowQueue: Job[] = []
  private nextId = 1
  private closed = false
  private readonly entry = workerEntry(import.meta.url, "sim")

  constructor(
    private readonly size: number,
    private readonly maxQueue: number,
    private readonly maxLowQueue: number,
    private readonly jobTimeoutMs: number,
    private readonly idleMs: number,
  ) {}

  run(prepared: PreparedSpeech, priority: SpeechPriority): Promise<SynthesizedAudio> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new SpeechSynthesisError("ENGINE_FAILURE", "the speech provider is closed"))
      const job: Job = { id: this.nextId++, prepared, resolve, reject }
      const slot =
        this.slots.find((s) => s.job === undefined) ?? (this.slots.length < this.size ? this.spawn() : undefined)
      if (slot !== undefined) return this.dispatch(slot, job)
      const waiting = this.queue.length + this.lowQueue.length
      if (waiting >= this.maxQueue || (priority === "low" && this.lowQueue.length >= this.maxLowQueue)) {
        return reject(new SpeechSynthesisError("BUSY", `${waiting} syntheses are already waiting; retry shortly`))
      }
      if (priority === "low") this.lowQueue.push(job)
      else this.queue.push(job)
    })
  }

  async close(): Promise<void> {
    this.closed = true
    const waiting = [...this.queue.splice(0), ...this.lowQueue.splice(0)]
    for (const job of waiting) job.reject(new SpeechSynthesisError("ENGINE_FAILURE", "the speech provider is closed"))
    // Each exit handler rejects the job its worker was running.
    await Promise.all(this.slots.map((s) => s.worker.terminate()))
  }

  private spawn(): Slot {
    const worker = new Worker(this.entry.target, { ...this.entry.options, name: "parley-speech" })
    worker.unref()
    const slot: Slot = { worker, job: undefined, timer: undefined, idle: undefined, timedOut: false, error: undefined }
    worker.on("message", (msg: WorkerResult) => this.settle(slot, msg))
    worker.on("error", (err) => {
      slot.error = err
    })
    worker.on("messageerror", (err) => {
      slot.error = err
      void worker.terminate()
    })
    worker.once("exit", (code) => this.exited(slot, code))
    this.slots.push(slot)
    return slot
  }

  private dispatch(slot: Slot, job: Job): void {
    slot.job = job
    clearTimeout(slot.idle)
    // A running job holds the process open, as any pending I/O would; an idle worker does not.
    slot.worker.ref()
    slot.timer = setTimeout(() => {
      slot.timedOut = true
      void slot.worker.terminate()
    }, this.jobTimeoutMs)
    slot.timer.unref()
    const message: WorkerJob = { id: job.id, job: job.prepared }
    slot.worker.postMessage(message)
  }

  private settle(slot: Slot, msg: WorkerResult): void {
    const job = slot.job
    if (job === undefined || msg.id !== job.id) return
    clearTimeout(slot.timer)
    slot.job = undefined
    slot.worker.unref()
    if (msg.ok) {
      job.resolve({ audio: msg.audio, mime: "audio/mpeg", duration_ms: msg.duration_ms, sample_rate: msg.sample_rate })
    } else {
      job.reject(new SpeechSynthesisError(CODES.has(msg.code) ? msg.code : "ENGINE_FAILURE", msg.message))
    }
    const next = this.next()
    if (next !== undefined) this.dispatch(slot, next)
    else if (this.idleMs > 0) {
      slot.idle = setTimeout(() => this.retire(slot), this.idleMs)
      slot.idle.unref()
    }
  }

  /** Stops an idle worker; out of `slots` at once, so no job is sent to it while it exits. */
  private retire(slot: Slot): void {
    if (slot.job !== undefined || this.closed) return
    const at = this.slots.indexOf(slot)
    if (at >= 0) this.slots.splice(at, 1)
    void slot.worker.terminate()
  }

  /** The job a free worker takes: the oldest normal one, else the oldest low one. */
  private next(): Job | undefined {
    return this.queue.shift() ?? this.lowQueue.shift()
  }

  private exited(slot: Slot, code: number): void {
    const at = this.slots.indexOf(slot)
    if (at >= 0) this.slots.splice(at, 1)
    clearTimeout(slot.timer)
    clearTimeout(slot.idle)
    const job = slot.job
    slot.job = undefined
    if (job !== undefined) {
      const why = this.closed
        ? "the speech provider is closed"
        : slot.timedOut
          ? `synthesis took longer than ${this.jobTimeoutMs} ms; its worker was stopped`
          : `the speech worker exited (code ${code})${slot.error instanceof Error ? `: ${slot.error.message}` : ""}`
      job.reject(new SpeechSynthesisError("ENGINE_FAILURE", why, { cause: slot.error }))
    }
    // Jobs waiting for this worker get a replacement rather than waiting for another to free up.
    if (!this.closed) {
      const next = this.next()
      if (next !== undefined) this.dispatch(this.spawn(), next)
    }
  }
}

export function makeSimSpeech(
  opts: SimSpeechOptions = {},
): SpeechProvider & Required<Pick<SpeechProvider, "close" | "cloneVoice">> {
  const workers = opts.workers ?? defaultWorkers()
  const maxQueue = opts.maxQueue ?? DEFAULT_MAX_QUEUE
  const maxLowQueue = opts.maxLowQueue ?? Math.floor(maxQueue / 2)
  const jobTimeoutMs = opts.jobTimeoutMs ?? DEFAULT_JOB_TIMEOUT_MS
  const idleMs = opts.idleMs ?? DEFAULT_IDLE_MS
  if (!Number.isSafeInteger(workers) || workers < 1)
    throw new RangeError(`workers must be a positive integer, got ${workers}`)
  if (!Number.isSafeInteger(maxQueue) || maxQueue < 0)
    throw new RangeError(`maxQueue must be a non-negative integer, got ${maxQueue}`)
  if (!Number.isSafeInteger(maxLowQueue) || maxLowQueue < 0 || maxLowQueue > maxQueue)
    throw new RangeError(`maxLowQueue must be an integer from 0 to maxQueue, got ${maxLowQueue}`)
  if (!(jobTimeoutMs > 0)) throw new RangeError(`jobTimeoutMs must be positive, got ${jobTimeoutMs}`)
  // setTimeout takes up to 2^31 − 1 ms (a longer delay fires at once).
  if (!Number.isSafeInteger(idleMs) || idleMs < 0 || idleMs > 2_147_483_647)
    throw new RangeError(`idleMs must be an integer from 0 to 2147483647, got ${idleMs}`)
  const pool = new WorkerPool(workers, maxQueue, maxLowQueue, jobTimeoutMs, idleMs)
  return {
    name: "sim",
    async synthesize(req: SpeechRequest): Promise<SynthesizedAudio> {
      // Bad input is refused here, at once, without taking a worker or a queue place.
      return pool.run(prepareSpeech(req), req.priority ?? "normal")
    },
    // Tens of milliseconds for the longest WAV (decimated to 16 kHz, pitch from ≤150 frames).
    async cloneVoice(sample: VoiceSample): Promise<ClonedVoice> {
      return { vendor_voice_id: null, params: deriveVoiceParams(sample) }
    },
    close: () => pool.close(),
  }
}
