// Deadlines: many items each due at its own instant, on one timer per owner: a binary heap ordered
// by instant with the timer armed for the earliest, so adding or cancelling one is O(log n).
import type { WallClock } from "../../src/platform/Clock.js"

/** setTimeout's longest delay (about 24.8 days): a later deadline re-arms the timer when it fires. */
const MAX_DELAY_MS = 2 ** 31 - 1

const systemClock: WallClock = { now: () => new Date(), nowMs: () => Date.now() }

/** One scheduled item; cancelling it after it fired (or twice) does nothing. */
export interface Deadline {
  cancel(): void
}

interface Entry<T> {
  readonly at: number
  readonly item: T
  /** Its place in the heap; -1 once it fired or was cancelled. */
  index: number
}

export class Deadlines<T> {
  private readonly heap: Entry<T>[] = []
  private timer: ReturnType<typeof setTimeout> | undefined
  /** The instant the timer is armed for (Infinity when none is). */
  private armedFor = Number.POSITIVE_INFINITY

  /** `due` gets every item whose instant has come, earliest first, once per firing. */
  constructor(
    private readonly due: (items: T[]) => void,
    private readonly clock: WallClock = systemClock,
  ) {}

  get size(): number {
    return this.heap.length
  }

  /** Schedules `item` for `atMs` (epoch milliseconds on the clock); an instant already past is due at once. */
  add(atMs: number, item: T): Deadline {
    const entry: Entry<T> = { at: atMs, item, index: this.heap.length }
    this.heap.push(entry)
    this.up(entry.index)
    this.arm()
    return { cancel: () => this.remove(entry) }
  }

  private remove(entry: Entry<T>): void {
    const i = entry.index
    if (i < 0) return
    entry.index = -1
    const last = this.heap.pop()!
    if (last !== entry) {
      this.heap[i] = last
      last.index = i
      this.down(i)
      this.up(last.index)
    }
    this.arm()
  }

  /** Keeps the timer on the earliest instant: re-armed only when that instant changes. */
  private arm(): void {
    const next = this.heap[0]?.at ?? Number.POSITIVE_INFINITY
    if (next === this.armedFor) return
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.armedFor = next
    if (next === Number.POSITIVE_INFINITY) return
    const wait = Math.min(Math.max(next - this.clock.nowMs(), 0), MAX_DELAY_MS)
    this.timer = setTimeout(() => this.fire(), wait)
    // The deadlines are for what else keeps the process alive (open connections), never a reason to stay.
    this.timer.unref?.()
  }

  private fire(): void {
    this.timer = undefined
    this.armedFor = Number.POSITIVE_INFINITY
    const now = this.clock.nowMs()
    const items: T[] = []
    while (this.heap.length > 0 && this.heap[0]!.at <= now) {
      const top = this.heap[0]!
      top.index = -1
      const last = this.heap.pop()!
      if (last !== top) {
        this.heap[0] = last
        last.index = 0
        this.down(0)
      }
      items.push(top.item)
    }
    // Armed before `due` runs, which may cancel or add deadlines.
    this.arm()
    if (items.length > 0) this.due(items)
  }

  private up(i: number): void {
    const h = this.heap
    const e = h[i]!
    while (i > 0) {
      const parent = (i - 1) >> 1
      const p = h[parent]!
      if (p.at <= e.at) break
      h[i] = p
      p.index = i
      i = parent
    }
    h[i] = e
    e.index = i
  }

  private down(i: number): void {
    const h = this.heap
    const e = h[i]!
    const n = h.length
    for (;;) {
      const l = 2 * i + 1
      if (l >= n) break
      const r = l + 1
      const c = r < n && h[r]!.at < h[l]!.at ? r : l
      const child = h[c]!
      if (e.at <= child.at) break
      h[i] = child
      child.index = i
      i = c
    }
    h[i] = e
    e.index = i
  }
}
