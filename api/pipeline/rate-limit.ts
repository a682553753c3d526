// rateLimit: with RATE_LIMIT_RPS=N a workspace (any user or API key of it) past N requests in a
// second, counted across every api process, is answered 429 RATE_LIMITED with X-RateLimit-Limit,
// X-RateLimit-Remaining and Retry-After. Runs once the caller is known, before its body is read;
// public and system requests are not counted. Unset: the step is not in the pipeline at all.
import type { Logger } from "pino"
import type { Sql } from "../../src/platform/Db.js"
import { RateLimited } from "../../src/platform/errors.js"
import { rateLimited } from "../../src/platform/http.metrics.js"
import { type Verdict, WorkspaceRateLimiter } from "../../src/platform/workspace-rate.js"
import { leaseRequests } from "../../src/platform/workspace-rate.repo.js"
import { type HttpError, toHttpError } from "../error-map.js"

export type RateGate = WorkspaceRateLimiter

/** The gate for `limit` requests a second per workspace; undefined when no limit is set. */
export function rateLimitGate(limit: number | undefined, sql: Sql, log: Logger): RateGate | undefined {
  if (limit === undefined) return undefined
  let warnedAt = 0
  return new WorkspaceRateLimiter({
    limit,
    lease: (tenantId, want) => leaseRequests(sql, tenantId, want, limit),
    onError: (err) => {
      // Once every 10 s at most: an outage would otherwise log a line per workspace per second.
      const now = Date.now()
      if (now - warnedAt < 10_000) return
      warnedAt = now
      log.warn({ err }, "rate limit budget unavailable; admitting requests uncounted")
    },
  })
}

/** The 429 for a refused verdict. */
export function refusal(v: Exclude<Verdict, { allowed: true }>): HttpError {
  const e = toHttpError(
    new RateLimited({
      message: `this workspace is over its limit of ${v.limit} requests per second`,
      retryAfterSeconds: v.retryAfterSeconds,
    }),
  )
  return {
    ...e,
    headers: { ...e.headers, "X-RateLimit-Limit": String(v.limit), "X-RateLimit-Remaining": String(v.remaining) },
  }
}

/** Runs `pass` when the workspace is within its budget, else `refuse` with the 429. */
export function throughGate(
  gate: RateGate,
  tenantId: number,
  pass: () => Promise<void>,
  refuse: (e: HttpError) => void,
): Promise<void> {
  const decide = (v: Verdict): Promise<void> | undefined => {
    if (v.allowed) return pass()
    rateLimited.inc()
    refuse(refusal(v))
    return undefined
  }
  const v = gate.admit(tenantId)
  return v instanceof Promise ? v.then(decide) : (decide(v) ?? Promise.resolve())
}
