// Timers that never hold the event loop for long. Node runs every expired timer in one go: with
// thousands of calls in a process, a burst of due callbacks (a ramp's rings, a wave of endings) ran
// for hundreds of milliseconds with no I/O in between, so health checks, bus messages and the next
// audio frame waited. Here the callbacks due at once run in slices (at most SLICE_MS, at most
// SLICE_CALLBACKS), and the loop polls I/O (and runs its own timers) between slices. Order is
// kept: by due time, then by when each was set. One Node timer drives the lot, ref'd while a ref'd
// callback waits.

/** The most a slice runs callbacks before it yields to I/O. */
const SLICE_MS = 4
/**
 * The most callbacks a slice runs: what they start continues in promise jobs after the slice (a
 * settled listen resumes a conversation), outside its clock, so the count bounds that work too.
 */
const SLICE_CALLBACKS = 16

export interface FairTimer {
  readonly at: number
  readonly seq: number
  readonly fn: (arg: never) => void
  /** What `fn` is called with (so a caller need not make a closure per timer). */
  readonly arg: unknown
  readonly ref: boolean
  cancelled: boolean
}

/** What XState's `createActor(…, { clock })` takes: delayed events scheduled fairly. */
export interface FairClock {
  setTimeout(fn: () => void, ms: number): FairTimer
  clearTimeout(timer: FairTimer): void
}

export class FairTimers implements FairClock {
  private readonly heap: FairTimer[] = []
  private seq = 0
  private refs = 0
  private cancelledCount = 0
  private driver: NodeJS.Timeout | undefined
  private driverAt = Number.POSITIVE_INFINITY
  private slicing = false

  /**
   * Calls `fn(arg)` after `ms` (at least 1, as setTimeout does); `ref: false` does not hold the
   * process open.
   */
  setTimeout<A>(fn: (arg: A) => void, ms: number, ref = true, arg?: A): FairTimer {
    const t: FairTimer = { at: Date.now() + Math.max(1, ms), seq: this.seq++, fn, arg, ref, cancelled: false }
    this.push(t)
    if (ref) this.refs++
    if (!this.slicing) this.arm()
    return t
  }

  clearTimeout(t: FairTimer | undefined): void {
    if (t === undefined || t.cancelled) return
    t.cancelled = true
    if (t.ref) this.refs--
    this.cancelledCount++
    // Cancelled entries wait for their turn to be dropped; past half the heap, drop them now.
    if (this.cancelledCount > 1024 && this.cancelledCount * 2 > this.heap.length) this.compact()
    if (this.refs === 0) this.driver?.unref()
  }

  /** Callbacks waiting (not cancelled). */
  get size(): number {
    return this.heap.length - this.cancelledCount
  }

  private arm(): void {
    const next = this.peek()
    if (next === undefined) {
      if (this.driver !== undefined) clearTimeout(this.driver)
      this.driver = undefined
      this.driverAt = Number.POSITIVE_INFINITY
      return
    }
    if (this.driver !== undefined && this.driverAt <= next.at) {
      if (this.refs > 0) this.driver.ref()
      return
    }
    if (this.driver !== undefined) clearTimeout(this.driver)
    this.driverAt = next.at
    this.driver = setTimeout(this.fire, Math.max(1, next.at - Date.now()))
    if (this.refs === 0) this.driver.unref()
  }

  private readonly fire = (): void => {
    this.driver = undefined
    this.driverAt = Number.POSITIVE_INFINITY
    this.slice()
  }

  /** Runs what is due for up to SLICE_MS; the rest in the next slice, after the loop has polled I/O. */
  private readonly slice = (): void => {
    this.slicing = true
    const start = performance.now()
    let ran = 0
    try {
      for (;;) {
        const next = this.peek()
        if (next === undefined || next.at > Date.now()) break
        this.pop()
        if (next.ref) this.refs--
        next.cancelled = true
        try {
          ;(next.fn as (arg: unknown) => void)(next.arg)
        } catch (err) {
          // As an expired Node timer's exception would: uncaught, after the slice is left consistent.
          queueMicrotask(() => {
            throw err
          })
        }
        if (++ran >= SLICE_CALLBACKS || performance.now() - start >= SLICE_MS) {
          const after = this.peek()
          if (after !== undefined && after.at <= Date.now()) {
            setImmediate(this.slice)
            return
          }
          break
        }
      }
    } finally {
      this.slicing = false
    }
    this.arm()
  }

  /** The earliest entry not cancelled (cancelled ones on top are dropped on the way). */
  private peek(): FairTimer | undefined {
    while (this.heap.length > 0 && this.heap[0]!.cancelled) {
      this.pop()
      this.cancelledCount--
    }
    return this.heap[0]
  }

  private compact(): void {
    const live = this.heap.filter((t) => !t.cancelled)
    this.heap.length = 0
    this.cancelledCount = 0
    for (const t of live) this.push(t)
  }

  private static before(a: FairTimer, b: FairTimer): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq)
  }

  private push(t: FairTimer): void {
    const h = this.heap
    h.push(t)
    let i = h.length - 1
    while (i > 0) {
      const p = (i - 1) >> 1
      if (!FairTimers.before(h[i]!, h[p]!)) break
      ;[h[i], h[p]] = [h[p]!, h[i]!]
      i = p
    }
  }

  private pop(): FairTimer | undefined {
    const h = this.heap
    const top = h[0]
    const last = h.pop()
    if (h.length === 0 || last === undefined) return top
    h[0] = last
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < h.length && FairTimers.before(h[l]!, h[m]!)) m = l
      if (r < h.length && FairTimers.before(h[r]!, h[m]!)) m = r
      if (m === i) break
      ;[h[i], h[m]] = [h[m]!, h[i]!]
      i = m
    }
    return top
  }
}
