// The clock of every call's audio in a process (the runtime's agent voices, the simulated callees):
// one timer every 20 ms tells each playing call how many frames fell due since the last wake-up,
// so 200 calls cost 50 wake-ups a second, not 10,000. A late wake-up (the loop was busy) hands out
// the frames that fell due meanwhile, at most a few, so the audio keeps its pace instead of
// drifting behind. Simulated calls at a time scale run their audio at that scale: at 0.01 a
// wake-up is 1 s of audio, 50 frames, which a call sends batched in one message.

/** One frame of phone audio. */
export const FRAME_MS = 20

/** Something with audio to send: tick(due) sends `due` frames' worth, false once it has nothing left. */
export interface Paced {
  tick(due: number): boolean
}

/** The most wake-ups' worth of frames one wake-up hands out to catch up (100 ms of audio at real time). */
const MAX_CATCH_UP = 5
/** The fastest audio is paced: 500 times real time (a time scale of 0 runs at this). */
const MIN_SCALE = 0.002

export interface PacerOptions {
  /** How fast the audio runs against real time: 1 real time, 0.01 a hundred times faster. */
  readonly timeScale?: number
  readonly now?: () => number
}

export class Pacer {
  /** Real milliseconds per frame. */
  readonly frameMs: number
  private readonly playing = new Set<Paced>()
  private timer: NodeJS.Timeout | undefined
  /** When the frames handed out so far were due. */
  private last = 0
  private readonly now: () => number
  private readonly maxDue: number

  constructor(o: PacerOptions = {}) {
    this.frameMs = FRAME_MS * Math.min(1, Math.max(MIN_SCALE, o.timeScale ?? 1))
    this.now = o.now ?? (() => performance.now())
    this.maxDue = Math.round((FRAME_MS / this.frameMs) * MAX_CATCH_UP)
  }

  /** Starts pacing `p` until its tick() says it has nothing left. */
  add(p: Paced): void {
    this.playing.add(p)
    if (this.timer !== undefined) return
    this.last = this.now() - FRAME_MS
    this.timer = setInterval(() => this.wake(), FRAME_MS)
    this.wake()
  }

  get size(): number {
    return this.playing.size
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
    this.playing.clear()
  }

  private wake(): void {
    const t = this.now()
    const due = Math.min(this.maxDue, Math.max(1, Math.floor((t - this.last) / this.frameMs)))
    this.last += due * this.frameMs
    // Further behind than a catch-up can mend: the audio resumes its pace from now.
    if (t - this.last > this.maxDue * this.frameMs) this.last = t
    for (const p of this.playing) if (!p.tick(due)) this.playing.delete(p)
    if (this.playing.size === 0) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }
}
