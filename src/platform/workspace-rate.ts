// The workspace request rate limit (RATE_LIMIT_RPS) in one process: requests are admitted from
// budget leased in small slices from the workspace's one-second window in Postgres
// (workspace-rate.repo.ts), so every api process draws on one budget of N a second without a
// database round trip per request. The processes together never admit more than N in a window;
// they may admit fewer by what they leased and did not use (at most a slice each, N/50).

/** What one lease of the shared window answered. */
export interface Lease {
  readonly granted: number
  readonly used: number
  readonly msLeft: number
}

export type Verdict =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly limit: number; readonly remaining: number; readonly retryAfterSeconds: number }

export interface RateLimiterOptions {
  /** Requests per second per workspace. */
  readonly limit: number
  /** Leases up to `want` requests of the workspace's current window. */
  readonly lease: (tenantId: number, want: number) => Promise<Lease>
  /** Called when a lease failed: the limiter then admits that workspace's requests for a second. */
  readonly onError?: (e: unknown) => void
  readonly now?: () => number
}

interface Bucket {
  /** Local time the leased window ends. */
  windowEnd: number
  /** Leased requests not yet admitted. */
  tokens: number
  /** The window's budget is spent (a lease granted nothing). */
  spent: boolean
  /** Until this local time requests are admitted uncounted (the database did not answer). */
  openUntil: number
  pending: Promise<void> | undefined
}

const ALLOWED: Verdict = { allowed: true }
/** Buckets kept before stale ones (windows long over) are swept. */
const SWEEP_AT = 10_000

export class WorkspaceRateLimiter {
  private readonly buckets = new Map<number, Bucket>()
  private readonly slice: number
  private readonly now: () => number

  constructor(private readonly opts: RateLimiterOptions) {
    this.slice = Math.max(1, Math.ceil(opts.limit / 50))
    this.now = opts.now ?? Date.now
  }

  /** Admits one request of the workspace, or says why not; synchronous while leased budget lasts. */
  admit(tenantId: number): Verdict | Promise<Verdict> {
    const b = this.bucket(tenantId)
    const now = this.now()
    if (now >= b.windowEnd) {
      b.tokens = 0
      b.spent = false
    }
    if (b.tokens > 0) {
      b.tokens--
      return ALLOWED
    }
    if (now < b.openUntil) return ALLOWED
    if (b.spent)
      return {
        allowed: false,
        limit: this.opts.limit,
        remaining: 0,
        retryAfterSeconds: Math.max(1, Math.ceil((b.windowEnd - now) / 1000)),
      }
    b.pending ??= this.refill(tenantId, b)
    return b.pending.then(() => this.admit(tenantId))
  }

  private async refill(tenantId: number, b: Bucket): Promise<void> {
    try {
      const lease = await this.opts.lease(tenantId, this.slice)
      const now = this.now()
      b.windowEnd = now + lease.msLeft
      b.tokens = lease.granted
      b.spent = lease.granted === 0
    } catch (e) {
      // Fail open: a database that does not answer must not take the API down with it.
      this.opts.onError?.(e)
      b.openUntil = this.now() + 1000
    } finally {
      b.pending = undefined
    }
  }

  private bucket(tenantId: number): Bucket {
    let b = this.buckets.get(tenantId)
    if (b === undefined) {
      if (this.buckets.size >= SWEEP_AT) this.sweep()
      b = { windowEnd: 0, tokens: 0, spent: false, openUntil: 0, pending: undefined }
      this.buckets.set(tenantId, b)
    }
    return b
  }

  private sweep(): void {
    const stale = this.now() - 2000
    for (const [id, b] of this.buckets)
      if (b.windowEnd < stale && b.openUntil < stale && b.pending === undefined) this.buckets.delete(id)
  }
}
