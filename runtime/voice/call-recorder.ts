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

/** Where in the recording a turn began (ms of audio), for a player that follows the transcript. */
export interface RecordingCue {
  readonly at_ms: number
  readonly speaker: "agent" | "callee"
}

/** Where a finished recording goes (src/recordings/, wired by the host). */
export type SaveRecording = (r: {
  readonly tenantId: number
  readonly callId: number
  readonly parts: RecordingParts
  readonly cues: readonly RecordingCue[]
}) => Promise<void>

/** Turns marked at most (a call of 30 minutes has a few hundred). */
const MAX_CUES = 2_000

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
  // The take and its clock start with the call's first frame (a call never answered records nothing).
  let tracks: TwoTrack | undefined
  let take: RecordingTake | undefined
  let over = false
  const start = (): TwoTrack | undefined => {
    if (tracks !== undefined || over) return tracks
    try {
      take = d.encoder.open()
    } catch (err) {
      // As many calls are being recorded as the encoder takes (or it is closing): this one is not.
      over = true
      recordingFailures.inc()
      d.log.warn({ err, call_id: d.callId }, "the call is not recorded: the encoder is full")
      return undefined
    }
    tracks = new TwoTrack({ frameMs: FRAME_MS * Math.min(1, d.timeScale) })
    return tracks
  }
  let pending = 0
  const cues: RecordingCue[] = []
  const flush = (all: boolean) => {
    const slots = all ? tracks?.takeAll() : tracks?.take()
    if (slots !== undefined) take?.push(slots)
    pending = 0
  }
  const heard = (side: "callee" | "agent") => (bytes: Uint8Array) => {
    const t = start()
    if (t === undefined || take === undefined) return
    t.push(side, bytes)
    pending += bytes.length / 160
    if (pending >= BATCH_SLOTS) flush(false)
  }
  return {
    heard: heard("callee"),
    spoke: heard("agent"),
    turn: (speaker, agoMs) => {
      const t = start()
      if (t !== undefined && take !== undefined && cues.length < MAX_CUES)
        cues.push({ at_ms: Math.max(0, t.slotNow * FRAME_MS - agoMs), speaker })
    },
    finish: async () => {
      over = true
      const t = take
      if (t === undefined) return
      flush(true)
      take = undefined
      try {
        const parts = await t.finish()
        if (parts.durationMs === 0) return
        await d.save({ tenantId: d.tenantId, callId: d.callId, parts, cues })
        recordingsSaved.inc()
      } catch (err) {
        recordingFailures.inc()
        d.log.error({ err, call_id: d.callId }, "the call's recording could not be kept")
      }
    },
  }
}
