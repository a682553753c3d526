// One call's recording, as its audio goes: the media session's tap hands over the callee's frames
// as heard and the agent's as sent, TwoTrack puts them on the call's clock, and every second of
// aligned audio goes to the process's encoder (a worker thread: the event loop only copies bytes).
// When the call's stream is over the take is finished (mixed, and one side a channel) and saved;
// a failure loses the recording, never the call.
import type { Logger } from "pino"
import { FRAME_MS } from "../../src/platform/pacer.js"
import type { RecordingEncoder, RecordingParts, RecordingTake } from "../../src/providers/audio/recording-encoder.js"
import { TwoTrack } from "../../src/providers/audio/two-track.js"
import type { MediaTap } from "./media-session.js"
import { recordingFailures, recordingsSaved } from "./voice.metrics.js"

/** Aligned audio is handed to the encoder a second at a time. */
const BATCH_SLOTS = 50

/** Where a finished recording goes (src/recordings/, wired by the host). */
export type SaveRecording = (r: {
  readonly tenantId: number
  readonly callId: number
  readonly parts: RecordingParts
}) => Promise<void>

export interface CallRecording extends MediaTap {
  /** The call's audio is over: encodes the rest and saves it (never rejects). */
  finish(): Promise<void>
}

export function recordCall(d: {
  readonly tenantId: number
  readonly callId: number
  readonly timeScale: number
  readonly encoder: RecordingEncoder
  readonly save: SaveRecording
  readonly log: Logger
}): CallRecording {
  const tracks = new TwoTrack({ frameMs: FRAME_MS * Math.min(1, d.timeScale) })
  let take: RecordingTake | undefined = d.encoder.open()
  let pending = 0
  const flush = (all: boolean) => {
    const slots = all ? tracks.takeAll() : tracks.take()
    if (slots !== undefined) take?.push(slots)
    pending = 0
  }
  const heard = (side: "callee" | "agent") => (bytes: Uint8Array) => {
    if (take === undefined) return
    tracks.push(side, bytes)
    pending += bytes.length / 160
    if (pending >= BATCH_SLOTS) flush(false)
  }
  return {
    heard: heard("callee"),
    spoke: heard("agent"),
    finish: async () => {
      const t = take
      if (t === undefined) return
      flush(true)
      take = undefined
      try {
        const parts = await t.finish()
        if (parts.durationMs === 0) return
        await d.save({ tenantId: d.tenantId, callId: d.callId, parts })
        recordingsSaved.inc()
      } catch (err) {
        recordingFailures.inc()
        d.log.error({ err, call_id: d.callId }, "the call's recording could not be kept")
      }
    },
  }
}
