// A speech-simulator worker thread: runs the blocking eSpeak + MP3 engine one job at a time, so the
// HTTP event loop never waits on it. Started by sim.speech.ts; speaks only the messages below.
import { parentPort } from "node:worker_threads"
import { type PreparedSpeech, renderSpeech } from "./sim.engine.js"
import { type SpeechErrorCode, SpeechSynthesisError } from "./speech.interface.js"

export interface WorkerJob {
  readonly id: number
  readonly job: PreparedSpeech
}

export type WorkerResult =
  | {
      readonly id: number
      readonly ok: true
      readonly audio: Uint8Array
      readonly duration_ms: number
      readonly sample_rate: number
    }
  | { readonly id: number; readonly ok: false; readonly code: SpeechErrorCode; readonly message: string }

const port = parentPort
if (port === null) throw new Error("sim.worker must run as a worker thread")

port.on("message", ({ id, job }: WorkerJob) => {
  let result: WorkerResult
  let transfer: ArrayBuffer[] = []
  try {
    const clip = renderSpeech(job)
    result = { id, ok: true, audio: clip.audio, duration_ms: clip.duration_ms, sample_rate: clip.sample_rate }
    // encodeMp3 builds a fresh, unshared buffer: hand it over instead of copying it.
    if (clip.audio.byteOffset === 0 && clip.audio.byteLength === clip.audio.buffer.byteLength)
      transfer = [clip.audio.buffer as ArrayBuffer]
  } catch (err) {
    // Errors cross the thread boundary as plain data: the code is what callers act on.
    result =
      err instanceof SpeechSynthesisError
        ? { id, ok: false, code: err.code, message: err.message }
        : {
            id,
            ok: false,
            code: "ENGINE_FAILURE",
            message: `speech engine failed: ${err instanceof Error ? err.message : String(err)}`,
          }
  }
  port.postMessage(result, transfer)
})
