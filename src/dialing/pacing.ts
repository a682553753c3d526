// In-process pacing for the dialer: token buckets for calls per second (per provider account, per
// tenant) and slot counters for concurrent calls (per workflow, per tenant). Pure state, time in.
// Cross-process caps are mirrored in Postgres leases; these decide quickly within one process.

const EPSILON = 1e-9

/** Calls per second with a burst: full at first, refilled continuously at `ratePerSecond`. */
export class TokenBucket {
  private tokens: number
  private last: number | null = null

  constructor(
    private ratePerSecond: number,
    private burst: number,
  ) {
    assertRate(ratePerSecond, burst)
    this.tokens = burst
  }

  get rate(): number {
    return this.ratePerSecond
  }

  get capacity(): number {
    return this.burst
  }

  private refill(now: number): void {
    // A clock that steps back neither refills nor rewinds the bucket.
    if (this.last !== null && now > this.last)
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.ratePerSecond) / 1000)
    if (this.last === null || now > this.last) this.last = now
  }

  /** Ms until a token is available at `now` (0: one is), without taking it. */
  waitMs(now: number): number {
    this.refill(now)
    if (this.tokens >= 1 - EPSILON) return 0
    return Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.ratePerSecond - EPSILON))
  }

  /** 0 if a token was taken, else ms until one is available (nothing taken). */
  take(now: number): number {
    const wait = this.waitMs(now)
    if (wait === 0) this.tokens = Math.max(0, this.tokens - 1)
    return wait
  }

  /** New rate and burst; tokens already earned are kept up to the new burst. */
  reconfigure(ratePerSecond: number, burst: number, now: number): void {
    assertRate(ratePerSecond, burst)
    this.refill(now)
    this.ratePerSecond = ratePerSecond
    this.burst = burst
    this.tokens = Math.min(this.tokens, burst)
  }
}

function assertRate(ratePerSecond: number, burst: number): void {
  if (!(ratePerSecond > 0) || !Number.isFinite(ratePerSecond))
    throw new RangeError(`rate must be a positive number, got ${ratePerSecond}`)
  if (!(burst >= 1) || !Number.isFinite(burst)) throw new RangeError(`burst must be at least 1, got ${burst}`)
}

export type Acquire =
  | { readonly ok: true }
  | { readonly ok: false; readonly waitMs: number; readonly blockedBy: string }

/**
 * Several keyed buckets taken together ("carrier:sim", "tenant:42"): a call goes out only when
 * every bucket it passes through has a token, and then takes one from each.
 */
export class Pacer {
  private readonly buckets = new Map<string, TokenBucket>()

  /** Keys nobody configured get this rate (carriers allow 1–3 calls/s by default). */
  constructor(
    private readonly defaults: { readonly ratePerSecond: number; readonly burst: number } = {
      ratePerSecond: 1,
      burst: 1,
    },
  ) {
    assertRate(defaults.ratePerSecond, defaults.burst)
  }

  configure(key: string, ratePerSecond: number, burst: number, now = 0): void {
    const b = this.buckets.get(key)
    if (b === undefined) this.buckets.set(key, new TokenBucket(ratePerSecond, burst))
    else b.reconfigure(ratePerSecond, burst, now)
  }

  /** Drops a key's bucket (a tenant gone idle); it comes back at the default rate if used. */
  forget(key: string): void {
    this.buckets.delete(key)
  }

  private bucket(key: string): TokenBucket {
    let b = this.buckets.get(key)
    if (b === undefined) {
      b = new TokenBucket(this.defaults.ratePerSecond, this.defaults.burst)
      this.buckets.set(key, b)
    }
    return b
  }

  /** Takes one token from every key's bucket, or from none, reporting the longest wait. */
  tryAcquire(keys: readonly string[], now: number): Acquire {
    const unique = [...new Set(keys)]
    let waitMs = 0
    let blockedBy = ""
    for (const key of unique) {
      const w = this.bucket(key).waitMs(now)
      if (w > waitMs) {
        waitMs = w
        blockedBy = key
      }
    }
    if (waitMs > 0) return { ok: false, waitMs, blockedBy }
    for (const key of unique) this.bucket(key).take(now)
    return { ok: true }
  }
}

/** Caps by key; a key without one is not limited. */
export type Caps = Readonly<Record<string, number>>

/**
 * Concurrent calls held per key ("workflow:7", "tenant:42"): entering takes a slot under every
 * key or none, leaving gives them back, and no count ever goes below zero.
 */
export class SlotCounter {
  private readonly counts = new Map<string, number>()

  inUse(key: string): number {
    return this.counts.get(key) ?? 0
  }

  /** The first key whose cap is reached, if any. */
  blockedBy(keys: readonly string[], caps: Caps): string | undefined {
    return [...new Set(keys)].find((k) => {
      const cap = caps[k]
      return cap !== undefined && this.inUse(k) + 1 > Math.floor(cap)
    })
  }

  tryEnter(keys: readonly string[], caps: Caps): boolean {
    if (this.blockedBy(keys, caps) !== undefined) return false
    for (const k of new Set(keys)) this.counts.set(k, this.inUse(k) + 1)
    return true
  }

  leave(keys: readonly string[]): void {
    for (const k of new Set(keys)) {
      const n = this.inUse(k) - 1
      if (n > 0) this.counts.set(k, n)
      else this.counts.delete(k)
    }
  }
}

/**
 * At most `max` tasks in flight, the rest waiting in order. The runtime's wallet postings go
 * through one: each holds the workspace's wallet row, so more in flight only queue on that lock in
 * Postgres while holding pool connections the dial loop needs.
 */
export class Limiter {
  private active = 0
  private readonly waiting: Array<() => void> = []

  constructor(private readonly max: number) {
    if (!(max >= 1)) throw new RangeError(`max must be at least 1, got ${max}`)
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve))
    else this.active++
    try {
      return await task()
    } finally {
      const next = this.waiting.shift()
      if (next !== undefined) next()
      else this.active--
    }
  }

  /** Tasks waiting for a turn. */
  get queued(): number {
    return this.waiting.length
  }
}
