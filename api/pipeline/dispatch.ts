// dispatch: the request context built from the earlier steps (system key, validation,
// negotiation), the handler's Effect run on the app runtime, and its exit read as one outcome.
import { Cause, Effect, Exit, type ManagedRuntime, Option } from "effect"
import type { Principal } from "../../src/auth/principal.js"
import { type DomainError, ValidationFailed } from "../../src/platform/errors.js"
import type { Reply } from "../reply.js"
import type { AnyRoute, Method, RequestContext } from "../route.js"
import type { ApiServices } from "../services.js"
import type { StreamedBody } from "../upload.js"
import { withAudit } from "./audit.js"
import { idempotent } from "./idempotency.js"
import type { Incoming } from "./incoming.js"
import { negotiate } from "./negotiate.js"
import type { SystemCheck } from "./system-key.js"
import { validateBody, validateInput } from "./validate.js"

/** How a handler's run ended. */
export type Outcome =
  | { readonly kind: "reply"; readonly reply: Reply }
  | { readonly kind: "failed"; readonly error: DomainError }
  /** Interrupted because the client went away: nothing to answer. */
  | { readonly kind: "aborted" }
  | { readonly kind: "defect"; readonly cause: unknown; readonly pretty: string }

/** What the handler is given besides the request: the body and the caller. */
export interface Taken {
  readonly rawParams: Record<string, string>
  readonly raw: Buffer
  readonly upload: StreamedBody | undefined
  readonly principal: Principal | undefined
  readonly onAbort: (cb: () => void) => void
}

/** System key, validation of params and query, negotiation, body validation; the first failure answers. */
export function requestContext(
  inc: Incoming,
  route: AnyRoute,
  taken: Taken,
  checkSystemKey: SystemCheck,
): RequestContext<unknown, unknown, unknown> | DomainError {
  let systemTenantId: number | undefined
  if (route.auth === "system") {
    const checked = checkSystemKey(inc)
    if (checked instanceof Error) return checked
    systemTenantId = checked
  }
  const input = validateInput(route, taken.rawParams, inc.query)
  if (input instanceof ValidationFailed) return input
  const negotiated = negotiate(route.body, inc.headers["content-type"], taken.raw, taken.upload !== undefined)
  if (negotiated instanceof Error) return negotiated
  const body = validateBody(route, negotiated)
  if (body instanceof ValidationFailed) return body
  return {
    requestId: inc.requestId,
    method: (inc.method === "HEAD" ? "GET" : inc.method) as Method,
    path: inc.url,
    rawQuery: inc.query,
    params: input.params,
    query: input.query,
    body,
    parts: negotiated.kind === "parts" ? negotiated.parts : undefined,
    upload: taken.upload,
    rawBody: taken.raw,
    headers: inc.headers,
    remoteAddress: inc.remoteAddress,
    clientIp: inc.clientIp,
    principal: taken.principal,
    systemTenantId,
    onAbort: taken.onAbort,
  }
}

/** Runs the route's handler on the request (the context is built inside the Effect, as it runs). */
export async function dispatch(
  runtime: ManagedRuntime.ManagedRuntime<ApiServices, never>,
  route: AnyRoute,
  prepare: () => RequestContext<unknown, unknown, unknown> | DomainError,
  aborted: () => boolean,
): Promise<Outcome> {
  const program = Effect.suspend(() => {
    const ctx = prepare()
    if (!("requestId" in ctx)) return Effect.fail(ctx)
    return idempotent(route, ctx, withAudit(route))
  })
  return outcome(await runtime.runPromiseExit(program), aborted())
}

/** A handler's exit as an outcome; `aborted`: the client has gone. */
export function outcome(exit: Exit.Exit<Reply, DomainError>, aborted: boolean): Outcome {
  if (Exit.isSuccess(exit)) return { kind: "reply", reply: exit.value }
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return { kind: "failed", error: failure.value }
  if (Cause.isInterruptedOnly(exit.cause) && aborted) return { kind: "aborted" }
  const [first] = Cause.defects(exit.cause)
  return { kind: "defect", cause: first, pretty: Cause.pretty(exit.cause) }
}
