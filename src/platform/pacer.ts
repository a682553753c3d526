// The clock of every call's audio in a process (the runtime's agent voices, the simulated callees):
// one timer every 20 ms sends each playing call its next frame, so 200 calls cost 50 wake-ups a
// second, not 10,000. A late wake-up (the loop was busy) sends the frames that fell due meanwhile,
// at most a few, so the audio keeps its real-time pace instead of drifting behind.

/** One frame of phone audio. */
const FRAME_MS = 20

/** Something with audio to send: tick() sends one frame, false once it has nothing left. */
export interface Paced {
  tick(): boolean
}

/** The most frames one wake-up sends a call to catch up (100 ms of audio). */
const MAX_CATCH_UP = 5

export class Pacer {
  private readonly playing = new Set<Paced>()
  private timer: NodeJS.Timeout | undefined
  private last = 0

  constructor(private readonly now: () => number = () => performance.now()) {}

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
    const due = Math.min(MAX_CATCH_UP, Math.max(1, Math.floor((t - this.last) / FRAME_MS)))
    this.last += due * FRAME_MS
    if (t - this.last > MAX_CATCH_UP * FRAME_MS) this.last = t
    for (const p of this.playing) {
      let more = true
      for (let i = 0; i < due && more; i++) more = p.tick()
      if (!more) this.playing.delete(p)
    }
    if (this.playing.size === 0) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }
}
