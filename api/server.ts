// The HTTP server: one uWS catch-all that runs the request pipeline of api/pipeline/ (one module
// per step, composed below in the order they run), and shuts down gracefully.
import type { ManagedRuntime } from "effect"
import type { Logger } from "pino"
import { Auth } from "../src/auth/Auth.js"
import type { Invalidation, Principal } from "../src/auth/principal.js"
import { Credentials } from "../src/onboarding/Credentials.js"
import { Bus } from "../src/platform/Bus.js"
import { Clock } from "../src/platform/Clock.js"
import type { Config } from "../src/platform/config.js"
import { Db } from "../src/platform/Db.js"
import { MethodNotAllowed, NotFound, PayloadTooLarge, ShuttingDown } from "../src/platform/errors.js"
import { INTERNAL_ERROR, toHttpError } from "./error-map.js"
import { BodyTooLarge, ClientGone, Exchange } from "./http.js"
import { attachMediaStreams } from "./media-streams.js"
import { authenticate, authRequirement, type Caller, LookupFailed } from "./pipeline/authenticate.js"
import { bodyLimit } from "./pipeline/body-limit.js"
import { type CacheSlot, startCachedReads } from "./pipeline/cached-reads.js"
import { dispatch, requestContext } from "./pipeline/dispatch.js"
import { type Incoming, readIncoming } from "./pipeline/incoming.js"
import { logRequest } from "./pipeline/log-request.js"
import { recordRequest } from "./pipeline/observe.js"
import { OpenStreams } from "./pipeline/open-streams.js"
import { rateLimitGate, throughGate } from "./pipeline/rate-limit.js"
import { respond } from "./pipeline/respond.js"
import { StreamCaps } from "./pipeline/stream-caps.js"
import { systemKey } from "./pipeline/system-key.js"
import { takeBody } from "./pipeline/take-body.js"
import type { AnyRoute } from "./route.js"
import { type Match, Router } from "./router.js"
import type { ApiServices } from "./services.js"
import type { StreamedBody } from "./upload.js"
import { type HttpRequest, type HttpResponse, loadUws, type us_listen_socket } from "./uws.js"

export interface ApiServerOptions {
  readonly config: Config
  readonly log: Logger
  readonly runtime: ManagedRuntime.ManagedRuntime<ApiServices, never>
  readonly routes: ReadonlyArray<AnyRoute>
}

export interface ApiServer {
  readonly port: number
  /** Stops accepting, ends open streams, lets in-flight requests finish (up to the timeout), closes. */
  shutdown(): Promise<void>
}

const DONE = Promise.resolve()
const noop = () => {}
const READS = new Set(["GET", "HEAD"])

export async function startApiServer(opts: ApiServerOptions): Promise<ApiServer> {
  const { config, log, runtime } = opts
  const uws = loadUws()
  const router = new Router(opts.routes)
  const app = uws.App()
  // Ended at their credential's expiry by the clock the authenticator refuses expired ones by.
  const streams = new OpenStreams({ clock: runtime.runSync(Clock), log })
  // SSE_MAX_STREAMS_PER_KEY / _PER_WORKSPACE: event streams open at once, counted in this process.
  const streamCaps = new StreamCaps(config.sseCaps)
  let inFlight = 0
  let draining = false
  let idle: (() => void) | undefined

  const out = respond({ log, draining: () => draining, streams })
  const checkSystemKey = systemKey(config.systemKey)
  // Resolved once: per request it is a plain call, and a cached credential answers synchronously.
  const auth = runtime.runSync(Auth)
  // RATE_LIMIT_RPS: a workspace's requests drawn from one budget shared through Postgres; unset → off.
  const db = runtime.runSync(Db)
  const gate = rateLimitGate(config.rateLimitRps, db.sql, log)
  // The lists a dashboard polls, kept per workspace while the database says nothing they read changed.
  const cached = await startCachedReads(db, runtime.runSync(Bus), log)
  // Invalidations reach every api process over the bus (and this one directly): end the streams
  // opened with the credential, so a signed-out session or a revoked key stops receiving at once.
  const stopListening = auth.onInvalidate((inv: Invalidation) => {
    const open = streams.openWith(inv)
    if (open.length === 0) return
    log.info({ credential: inv.kind, streams: open.length }, "closing streams of an invalidated credential")
    for (const s of open) s.end()
  })

  // Carrier media streams: WebSockets let in by a call's single-use token (and a carrier's
  // signature, with the workspace's telco_a auth token as its webhooks are), their audio on the bus.
  const credentials = runtime.runSync(Credentials)
  const media = attachMediaStreams(app, {
    sql: db.sql,
    bus: runtime.runSync(Bus),
    log,
    signingToken: async (tenantId) =>
      (await credentials.active(tenantId, "telco_a"))?.secret ?? config.telcoA?.authToken,
    trustedProxies: config.trustedProxies,
  })

  // The pipeline, in order: readIncoming (requestId, clientAddress), bodyLimit, systemKey, takeBody,
  // authenticate, then inside dispatch systemKey (X-Tenant-Id), validate (params, query), negotiate, validate
  // (body), idempotency (an authenticated POST's Idempotency-Key) and the handler; streamCaps (an event stream's
  // slot); respond; logRequest once the request is over.
  app.any("/*", (res: HttpResponse, req: HttpRequest) => {
    const started = performance.now()
    // requestId, clientAddress: req is only valid until this function returns, so copy it out now.
    const inc = readIncoming(req, res, config.trustedProxies)
    const ex = new Exchange(res)
    inFlight++
    const finish = () => {
      inFlight--
      logRequest(log, ex, inc, started)
      recordRequest(ex, inc, started)
      if (inFlight === 0) idle?.()
    }
    const handled = handle(ex, inc)
    // Answered in this callback (a constant, a kept answer, a refusal): nothing to wait for.
    if (handled === DONE) return finish()
    handled
      .catch((e: unknown) => {
        log.error({ err: e, req_id: inc.requestId }, "request failed outside its handler")
        out.error(ex, inc, INTERNAL_ERROR)
      })
      .finally(finish)
  })

  /**
   * Everything after the copy: the body must be subscribed to before the first await. A route that
   * needs a user or a key learns who is calling before it reads more of the body than came with
   * the headers, and only a multipart body on a multipart route gets the upload limit.
   */
  function handle(ex: Exchange, inc: Incoming): Promise<void> {
    if (draining) {
      out.error(ex, inc, toHttpError(new ShuttingDown()), true)
      return DONE
    }
    const match = router.match(inc.method, inc.url)
    if (match.kind === "found") ex.route = match.route.path
    const plan = bodyLimit(match.kind === "found" ? match.route : undefined, inc.headers, config)
    // Refuse without reading: the connection is closed so the unread bytes go with it.
    if (plan instanceof PayloadTooLarge) {
      out.error(ex, inc, toHttpError(plan), true)
      return DONE
    }
    const bodyFailed = (e: unknown): void => {
      if (e instanceof ClientGone) return
      if (e instanceof BodyTooLarge) return out.error(ex, inc, tooLarge(plan.limit), true)
      throw e
    }

    if (match.kind !== "found") {
      // Read (within the JSON limit) so the connection stays usable for the client's next request.
      return takeBody(ex, plan).raw.then(() => out.error(ex, inc, toHttpError(unmatched(match, inc))), bodyFailed)
    }
    const route = match.route
    const read = READS.has(inc.method) && !plan.hasBody
    if (route.constant !== undefined && read) {
      out.reply(ex, inc, route.constant, false, undefined)
      return DONE
    }

    if (match.route.auth === "system") {
      // A system caller is checked before its body is read, as a user is below; the unread bytes
      // of a refused one go with the connection.
      const refused = checkSystemKey(inc)
      if (refused instanceof Error) {
        out.error(ex, inc, toHttpError(refused), plan.hasBody)
        return DONE
      }
    }

    const need = authRequirement(match.route, inc.method)
    // uWS hands the body only to a reader attached now, so attach it, paused until the caller is
    // known: an anonymous client cannot make the server take in its upload.
    const held = need !== undefined && plan.hasBody
    if (held) ex.hold()
    const body = takeBody(ex, plan)
    const run = (principal: Principal | undefined, slot?: CacheSlot) =>
      body.raw.then((raw) => answer(ex, inc, match.route, match.params, raw, body.upload, principal, slot), bodyFailed)
    if (need === undefined) return run(undefined)
    // A kept answer needs the caller's permission checked (above) and no shared rate budget to draw on.
    const cacheable = route.cached === true && read && gate === undefined

    const proceed = (caller: Caller): Promise<void> => {
      // Who is calling comes before what they sent: an unauthenticated caller gets 401, not a
      // lesson in the endpoint's schema. Its unread body goes with the connection.
      if (caller instanceof LookupFailed) out.defect(ex, inc, caller.cause, plan.hasBody)
      else if (caller instanceof Error) out.error(ex, inc, toHttpError(caller), plan.hasBody)
      else if (cacheable) {
        const kept = cached.lookup(route, caller.tenantId, match.params, inc.query)
        if ("ticket" in kept) return run(caller, kept)
        out.kept(ex, inc, kept)
      } else if (gate === undefined) return run(caller)
      else
        return throughGate(
          gate,
          caller.tenantId,
          () => run(caller),
          (e) => out.error(ex, inc, e, plan.hasBody),
        )
      return DONE
    }
    const caller = authenticate(() => auth.authenticate(inc, need), held ? () => ex.release() : noop)
    return caller instanceof Promise ? caller.then(proceed) : proceed(caller)
  }

  /** systemKey, negotiate and validate inside dispatch; then respond with what the handler made. */
  async function answer(
    ex: Exchange,
    inc: Incoming,
    route: AnyRoute,
    rawParams: Record<string, string>,
    raw: Buffer,
    upload: StreamedBody | undefined,
    principal: Principal | undefined,
    slot: CacheSlot | undefined,
  ): Promise<void> {
    const taken = { rawParams, raw, upload, principal, onAbort: (cb: () => void) => ex.onAbort(cb) }
    const prepare = () => requestContext(inc, route, taken, checkSystemKey)
    const result = await dispatch(runtime, route, prepare, () => ex.aborted)
    if (slot !== undefined && result.kind === "reply") cached.keep(slot, result.reply)
    // A signed-in request that may have changed data: its workspace's kept answers go, here and in
    // every other api process, before its client hears back. What a caller without a workspace
    // changes (a carrier's or a payment provider's callback, turns posted by a system caller) is
    // dropped by the database's notification of its commit.
    if (principal !== undefined && !READS.has(inc.method)) await cached.changed(principal.tenantId)
    // A streamed body the handler left unread goes with the connection.
    const unread = upload !== undefined && !upload.complete
    switch (result.kind) {
      case "reply": {
        // An event stream takes a slot of its caller's key or session and workspace (429 past a cap),
        // given back when it closes, or here if it never opened.
        const admitted = streamCaps.admit(result.reply, principal)
        if (!admitted.ok) return out.error(ex, inc, admitted.error, unread)
        return out.reply(ex, inc, admitted.reply, unread, principal).finally(admitted.release)
      }
      case "failed":
        return out.error(ex, inc, toHttpError(result.error), unread)
      case "aborted":
        return
      case "defect":
        return out.defect(ex, inc, result.cause, unread, result.pretty)
    }
  }

  /** uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT. */
  const EXCLUSIVE_PORT = 1
  const listening = new Promise<us_listen_socket>((resolve, reject) => {
    // The port is ours alone: by default uSockets sets SO_REUSEPORT, and a second server started on
    // a port in use would silently share it, each answering a share of the requests.
    const listen = app.listen as unknown as (
      host: string,
      port: number,
      options: number,
      cb: (socket: us_listen_socket | false) => void,
    ) => void
    listen.call(app, config.host, config.port, EXCLUSIVE_PORT, (socket) => {
      if (socket) resolve(socket)
      else reject(new Error(`could not listen on ${config.host}:${config.port} (port in use or address unavailable)`))
    })
  })
  const listenSocket = await listening.catch(async (e: unknown) => {
    await cached.stop()
    throw e
  })
  const port = uws.us_socket_local_port(listenSocket)
  log.info({ host: config.host, port }, "http listening")

  let shutdownPromise: Promise<void> | undefined
  return {
    port,
    shutdown: () =>
      (shutdownPromise ??= (async () => {
        draining = true
        stopListening()
        await cached.stop()
        uws.us_listen_socket_close(listenSocket)
        // Ending a stream stops its producer at once; its request stays in flight until the
        // response is ended, which for a client that is behind waits until its socket takes more
        // (see openStream's end()), so app.close() below does not cut off what it has yet to read.
        streams.endAll()
        media.closeAll()
        if (inFlight > 0) {
          const finished = new Promise<void>((r) => (idle = r))
          const timeout = delay(config.shutdownTimeoutMs).then(() => true)
          const timedOut = await Promise.race([finished.then(() => false), timeout])
          if (timedOut) log.warn({ in_flight: inFlight }, "shutdown timeout: closing requests still in flight")
        }
        // Closes every socket at once, idle keep-alive ones included, dropping any bytes uWS still
        // buffers for them.
        app.close()
        log.info("http closed")
      })()),
  }
}

/** The answer for a request no route took: 404, or 405 with the methods the path has. */
function unmatched(match: Exclude<Match, { kind: "found" }>, inc: Incoming): NotFound | MethodNotAllowed {
  return match.kind === "not-found"
    ? new NotFound({ message: `no route for ${inc.method} ${inc.url}` })
    : new MethodNotAllowed({ allow: match.allow })
}

function tooLarge(limitBytes: number) {
  return toHttpError(new PayloadTooLarge({ limitBytes }))
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref())
}
