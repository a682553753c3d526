// streamCaps: how many event streams (text/event-stream replies) one API key or session, and one
// workspace, may hold open at once in this api process; past either cap, 429 before the head is written.
import type { Principal } from "../../src/auth/principal.js"
import { RateLimited } from "../../src/platform/errors.js"
import { type SseRefusal, sseRefused } from "../../src/platform/http.metrics.js"
import { type HttpError, toHttpError } from "../error-map.js"
import type { Reply } from "../reply.js"

export interface StreamCapsOptions {
  /** SSE_MAX_STREAMS_PER_KEY: per API key, or per session (a JWT, by bearer or cookie). */
  readonly perCredential: number
  /** SSE_MAX_STREAMS_PER_WORKSPACE: every key and session of the workspace together. */
  readonly perWorkspace: number
}

/**
 * What a refused client is told to wait. A slot frees only when one of the caller's streams ends,
 * which no clock predicts: long enough not to invite a tight retry loop, short for a client that
 * has just closed one.
 */
export const STREAM_RETRY_AFTER_SECONDS = 10

/**
 * A reply let through, served as `reply`, its slot (if it took one) given back by `release` (any
 * number of calls, one release); or the refusal, with the cap that refused it.
 */
export type Admission =
  | { readonly ok: true; readonly reply: Reply; readonly release: () => void }
  | { readonly ok: false; readonly error: HttpError; readonly reason: SseRefusal }

const noop = () => {}

/**
 * The counts, kept in memory by each api process for the streams it holds: no round trip when a
 * stream opens or closes, and nothing to reclaim after a process dies. With N api processes a
 * caller may hold up to N times the caps (docs/security.md).
 */
export class StreamCaps {
  private readonly byCredential = new Map<string, number>()
  private readonly byWorkspace = new Map<number, number>()
  private total = 0

  constructor(private readonly caps: StreamCapsOptions) {}

  /** Slots held: the event streams open with a caller. */
  get held(): number {
    return this.total
  }

  /** Open event streams of the caller's key or session, and of its workspace. */
  heldBy(p: Principal): { credential: number; workspace: number } {
    return { credential: this.byCredential.get(credentialOf(p)) ?? 0, workspace: this.byWorkspace.get(p.tenantId) ?? 0 }
  }

  /**
   * Checks a handler's reply before anything of it is written. An event stream with a caller takes
   * a slot of its key or session and of its workspace, given back once when the stream closes
   * (client gone, ended by the server, revocation, expiry, shutdown) or, if it never opens (HEAD,
   * client gone first), when the caller calls `release`. Past a cap: the 429, and no slot taken.
   * Other replies, and streams of public or system routes (no caller to count), pass as they are.
   */
  admit(reply: Reply, principal: Principal | undefined): Admission {
    if (reply.kind !== "stream" || principal === undefined || !isEventStream(reply.contentType))
      return { ok: true, reply, release: noop }
    const credential = credentialOf(principal)
    const tenant = principal.tenantId
    const mine = this.byCredential.get(credential) ?? 0
    const workspace = this.byWorkspace.get(tenant) ?? 0
    const reason: SseRefusal | undefined =
      mine >= this.caps.perCredential
        ? principal.kind === "api_key"
          ? "key"
          : "session"
        : workspace >= this.caps.perWorkspace
          ? "workspace"
          : undefined
    if (reason !== undefined) {
      sseRefused.inc({ reason })
      return { ok: false, error: refusal(reason, this.caps), reason }
    }
    this.byCredential.set(credential, mine + 1)
    this.byWorkspace.set(tenant, workspace + 1)
    this.total++
    let held = true
    const release = () => {
      if (!held) return
      held = false
      this.total--
      decrement(this.byCredential, credential)
      decrement(this.byWorkspace, tenant)
    }
    const run = reply.run
    return {
      ok: true,
      reply: {
        ...reply,
        run: (writer) => {
          writer.onClose(release)
          return run(writer)
        },
      },
      release,
    }
  }
}

/** Whether a reply of this content type is an event stream (parameters such as charset aside). */
export function isEventStream(contentType: string): boolean {
  return contentType.trim().toLowerCase().startsWith("text/event-stream")
}

/** The name a caller's own streams are counted under: its API key, or its session. */
function credentialOf(p: Principal): string {
  return p.kind === "api_key" ? `key:${p.keyId}` : `session:${p.jti}`
}

function decrement<K>(counts: Map<K, number>, k: K): void {
  const n = (counts.get(k) ?? 0) - 1
  if (n > 0) counts.set(k, n)
  else counts.delete(k)
}

/** The 429 in the contract's shape: {error, code: RATE_LIMITED, retry_after_seconds} and Retry-After. */
function refusal(reason: SseRefusal, caps: StreamCapsOptions): HttpError {
  const message =
    reason === "workspace"
      ? `this workspace already has ${caps.perWorkspace} event streams open, its most at once; close one first`
      : `this ${reason === "key" ? "API key" : "session"} already has ${caps.perCredential} event streams open, ` +
        "its most at once; close one first"
  return toHttpError(new RateLimited({ message, retryAfterSeconds: STREAM_RETRY_AFTER_SECONDS }))
}
