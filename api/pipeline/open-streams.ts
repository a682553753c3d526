// The streams the server has open (SSE, downloads), by the credential each was opened with, so
// shutdown can end them all, a signed-out session or a revoked key stops receiving at once, and
// an event stream ends when its credential expires.
import type { Logger } from "pino"
import type { Invalidation, Principal } from "../../src/auth/principal.js"
import type { WallClock } from "../../src/platform/Clock.js"
import type { OpenStream } from "../http.js"
import { Deadlines } from "./deadlines.js"

export interface OpenStreamsOptions {
  /** The clock credentials' expiry is read against (the authenticator's). */
  readonly clock?: WallClock
  readonly log?: Pick<Logger, "info">
}

export class OpenStreams {
  private readonly all = new Set<OpenStream>()
  private readonly byCredential = new Map<string, Set<OpenStream>>()
  // One timer for the process, however many streams wait for their credential's expiry.
  private readonly expiries: Deadlines<OpenStream>

  constructor(opts: OpenStreamsOptions = {}) {
    const log = opts.log
    this.expiries = new Deadlines((due) => {
      log?.info({ streams: due.length }, "closing streams of an expired credential")
      // Ended as revocation ends them: the body is terminated and the connection stays usable.
      for (const s of due) s.end()
    }, opts.clock)
  }

  get size(): number {
    return this.all.size
  }

  /** Streams waiting for their credential's expiry. */
  get expiring(): number {
    return this.expiries.size
  }

  /**
   * Tracks `writer` until it closes, under the credentials of `principal` (if any). With
   * `endAtExpiry` (event streams) it is also ended at the instant the credential expires.
   */
  add(writer: OpenStream, principal: Principal | undefined, opts: { endAtExpiry?: boolean } = {}): void {
    this.all.add(writer)
    const credentials = principal === undefined ? [] : credentialsOf(principal)
    for (const c of credentials) this.byCredential.set(c, (this.byCredential.get(c) ?? new Set()).add(writer))
    const expiresAt = opts.endAtExpiry && principal !== undefined ? expiryOf(principal) : undefined
    const deadline = expiresAt === undefined ? undefined : this.expiries.add(expiresAt, writer)
    writer.onClose(() => {
      this.all.delete(writer)
      deadline?.cancel()
      for (const c of credentials) {
        const set = this.byCredential.get(c)
        set?.delete(writer)
        if (set?.size === 0) this.byCredential.delete(c)
      }
    })
  }

  /** The streams opened with the invalidated credential (ending them is the caller's part). */
  openWith(inv: Invalidation): OpenStream[] {
    const open = this.byCredential.get(invalidated(inv))
    return open === undefined ? [] : [...open]
  }

  endAll(): void {
    for (const s of [...this.all]) s.end()
  }
}

/** The names under which a principal's streams are found when one of its credentials is invalidated. */
export function credentialsOf(p: Principal): string[] {
  return p.kind === "api_key" ? [`key:${p.keyId}`] : [`session:${p.jti}`, `user:${p.userId}`]
}

/**
 * When the credential stops being accepted, in epoch milliseconds; undefined for a key without
 * one. A session ends at its JWT's `exp` (whole seconds: from that second on it is refused); a key
 * at its `expires_at`, which the API never changes once the key is made (revoke it to end it sooner).
 */
export function expiryOf(p: Principal): number | undefined {
  if (p.kind === "user") return p.expiresAt * 1000
  return p.expiresAt === null ? undefined : p.expiresAt.getTime()
}

/** The name an invalidation ends streams under. */
export function invalidated(inv: Invalidation): string {
  switch (inv.kind) {
    case "session":
      return `session:${inv.jti}`
    case "user":
      return `user:${inv.userId}`
    case "api_key":
      return `key:${inv.keyId}`
  }
}
