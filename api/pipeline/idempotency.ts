// idempotency: an authenticated POST carrying Idempotency-Key runs its handler under a claim on
// (workspace, key) and the first completed response is replayed to retries (src/idempotency/).
import { createHash } from "node:crypto"
import { Cause, Effect, Exit, Option } from "effect"
import { actorOf } from "../../src/auth/principal.js"
import { begin, complete, release, type StoredResponse } from "../../src/idempotency/idempotency.service.js"
import { type DomainError, ValidationFailed } from "../../src/platform/errors.js"
import { toHttpError } from "../error-map.js"
import { bytes, type Reply } from "../reply.js"
import type { AnyRoute, RequestContext } from "../route.js"
import type { ApiServices } from "../services.js"

export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
export const REPLAYED_HEADER = "Idempotent-Replayed"
export const MAX_IDEMPOTENCY_KEY = 255

const JSON_TYPE = "application/json; charset=utf-8"

type Ctx = RequestContext<unknown, unknown, unknown>
type Handler = (ctx: Ctx) => Effect.Effect<Reply, DomainError, ApiServices>

/** The key of an authenticated POST (undefined when none applies), or the 422 for a malformed one. */
export function idempotencyKeyOf(route: AnyRoute, ctx: Ctx): string | undefined | ValidationFailed {
  if (route.method !== "POST" || ctx.principal === undefined) return undefined
  const key = ctx.headers["idempotency-key"]
  if (key === undefined) return undefined
  if (key.length >= 1 && key.length <= MAX_IDEMPOTENCY_KEY) return key
  const message = `must be 1 to ${MAX_IDEMPOTENCY_KEY} characters`
  return new ValidationFailed({
    message: `${IDEMPOTENCY_KEY_HEADER} ${message}`,
    errors: [{ field: IDEMPOTENCY_KEY_HEADER, message }],
  })
}

/**
 * What makes two requests the same: method, path (with or without /v1), query, caller and body.
 * A streamed upload's body is not read here: its declared length stands in for it.
 */
export function fingerprint(ctx: Ctx): Buffer {
  const h = createHash("sha256")
  const field = (s: string | Buffer) => {
    h.update(String(Buffer.byteLength(s)))
    h.update(":")
    h.update(s)
  }
  field(ctx.method)
  field(ctx.path.replace(/^\/v1(?=\/)/, ""))
  field(ctx.rawQuery)
  field(ctx.principal === undefined ? "" : actorOf(ctx.principal))
  if (ctx.upload !== undefined) field(`upload:${ctx.headers["content-length"] ?? "chunked"}`)
  else field(ctx.rawBody)
  return h.digest()
}

/**
 * The response to keep, or undefined when a retry should run the request again: a 5xx or 429
 * (the client is told to retry), a defect, an interruption, or a stream (it is produced as it is
 * written, so there is no whole response to keep).
 */
export function keepable(exit: Exit.Exit<Reply, DomainError>): StoredResponse | undefined {
  const retryable = (status: number) => status >= 500 || status === 429
  if (Exit.isSuccess(exit)) {
    const r = exit.value
    if (retryable(r.status) || r.kind === "stream") return undefined
    const headers = r.headers ?? {}
    if (r.kind === "json")
      return { status: r.status, contentType: JSON_TYPE, headers, body: Buffer.from(JSON.stringify(r.body)) }
    return { status: r.status, contentType: r.contentType, headers, body: Buffer.from(r.body) }
  }
  const failure = Cause.failureOption(exit.cause)
  if (Option.isNone(failure)) return undefined
  const err = toHttpError(failure.value)
  if (retryable(err.status)) return undefined
  return {
    status: err.status,
    contentType: JSON_TYPE,
    headers: err.headers ?? {},
    body: Buffer.from(JSON.stringify(err.body)),
  }
}

/** The stored response again, marked as a replay. */
const replay = (r: StoredResponse): Reply =>
  bytes(r.contentType, r.body, r.status, { ...r.headers, [REPLAYED_HEADER]: "true" })

/**
 * Runs the handler, under an idempotency claim when the request carries a key. The claim is
 * settled (kept or released) even when the client goes away mid-handler.
 */
export function idempotent(
  route: AnyRoute,
  ctx: Ctx,
  handler: Handler,
): Effect.Effect<Reply, DomainError, ApiServices> {
  const key = idempotencyKeyOf(route, ctx)
  if (key === undefined) return handler(ctx)
  if (key instanceof ValidationFailed) return Effect.fail(key)
  const tenantId = ctx.principal!.tenantId
  return Effect.uninterruptibleMask((restore) =>
    Effect.gen(function* () {
      const begun = yield* begin(tenantId, key, fingerprint(ctx), { sealed: route.secretInAnswer === true })
      if (begun.kind === "replay") return replay(begun.response)
      const exit = yield* Effect.exit(restore(Effect.suspend(() => handler(ctx))))
      const kept = keepable(exit)
      if (kept === undefined) yield* release(begun.claimed)
      else yield* complete(begun.claimed, kept)
      return yield* exit
    }),
  )
}
