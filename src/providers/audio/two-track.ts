// The two sides of a call on one clock, for what hears the call whole (its recording, a supervisor
// listening in). The callee's frames and the agent's arrive separately, each as it is sent or heard
// (a simulated call's batched at its time scale), and neither side says when: a frame is placed at
// the slot (20 ms of the call) it arrived in, a batch of n frames in the n slots that ended then,
// and never before what that side already placed. Slots are handed out once a short while has
// passed (`lagMs`: a side's frames that were on their way are in by then); a slot a side sent
// nothing for is its silence. Memory is bounded: a ring of slots per side; what would overrun it
// (a side sending far ahead of the clock, or nobody taking) is dropped.
import { FRAME_SAMPLES } from "./g711.js"

export type Side = "callee" | "agent"

/** μ-law silence: the byte every missing sample is. */
export const ULAW_SILENCE = 0xff

/** Slots of both sides, from `from` (the call's 20 ms slots since the clock started). */
export interface TrackSlots {
  readonly from: number
  readonly count: number
  /** count × 160 μ-law bytes a side. */
  readonly callee: Uint8Array
  readonly agent: Uint8Array
}

export interface TwoTrackOptions {
  /** Real milliseconds per 20 ms frame (20 at real time; a simulated call's at its time scale). */
  readonly frameMs?: number
  /** How long after a slot's time it is handed out (real ms). */
  readonly lagMs?: number
  readonly now?: () => number
}

/** The most slots a side may be waiting in (besides the lag): 5 s of audio. */
const SPARE_SLOTS = 256
/** The lag is at most this many slots (a fast simulated call's 100 ms would be thousands). */
const MAX_LAG_SLOTS = 500

class Ring {
  readonly bytes: Uint8Array
  /** The first slot not yet placed on this side. */
  cursor = 0
  constructor(readonly slots: number) {
    this.bytes = new Uint8Array(slots * FRAME_SAMPLES).fill(ULAW_SILENCE)
  }
}

export class TwoTrack {
  private readonly frameMs: number
  private readonly lagSlots: number
  private readonly now: () => number
  private readonly start: number
  /** Slots handed out so far. */
  private taken = 0
  private readonly sides: Record<Side, Ring>
  /** Frames dropped because they would overrun a side's ring. */
  dropped = 0

  constructor(o: TwoTrackOptions = {}) {
    this.frameMs = o.frameMs ?? 20
    this.now = o.now ?? (() => performance.now())
    this.start = this.now()
    this.lagSlots = Math.min(MAX_LAG_SLOTS, Math.ceil((o.lagMs ?? 100) / this.frameMs))
    const capacity = this.lagSlots * 2 + SPARE_SLOTS
    this.sides = { callee: new Ring(capacity), agent: new Ring(capacity) }
  }

  /** The slot the clock is in now. */
  get slotNow(): number {
    return Math.floor((this.now() - this.start) / this.frameMs)
  }

  /** Places one side's frames (whole 160-byte frames; a short tail is dropped) as arriving now. */
  push(side: Side, bytes: Uint8Array): void {
    const ring = this.sides[side]
    const n = Math.floor(bytes.length / FRAME_SAMPLES)
    if (n === 0) return
    let at = Math.max(ring.cursor, this.taken, this.slotNow + 1 - n)
    for (let i = 0; i < n; i++, at++) {
      if (at - this.taken >= ring.slots) {
        this.dropped += n - i
        break
      }
      const offset = (at % ring.slots) * FRAME_SAMPLES
      ring.bytes.set(bytes.subarray(i * FRAME_SAMPLES, (i + 1) * FRAME_SAMPLES), offset)
      ring.cursor = at + 1
    }
  }

  /** The slots whose time has passed (by the lag), both sides; undefined when none are due. */
  take(): TrackSlots | undefined {
    return this.takeUpTo(this.slotNow - this.lagSlots)
  }

  /** Every slot either side has placed (the call is over: nothing more is on its way). */
  takeAll(): TrackSlots | undefined {
    return this.takeUpTo(Math.max(this.sides.callee.cursor, this.sides.agent.cursor))
  }

  private takeUpTo(end: number): TrackSlots | undefined {
    const from = this.taken
    const count = Math.min(end - from, this.sides.callee.slots)
    if (count <= 0) return undefined
    this.taken = from + count
    return {
      from,
      count,
      callee: this.drain(this.sides.callee, from, count),
      agent: this.drain(this.sides.agent, from, count),
    }
  }

  /** Copies `count` slots from `from` out of a ring, leaving silence behind for the ring's next lap. */
  private drain(ring: Ring, from: number, count: number): Uint8Array {
    const out = new Uint8Array(count * FRAME_SAMPLES)
    for (let i = 0; i < count; i++) {
      const offset = ((from + i) % ring.slots) * FRAME_SAMPLES
      const slot = ring.bytes.subarray(offset, offset + FRAME_SAMPLES)
      out.set(slot, i * FRAME_SAMPLES)
      slot.fill(ULAW_SILENCE)
    }
    return out
  }
}
