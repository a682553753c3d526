// The HTTP server: one uWS catch-all that matches the route table, reads and validates input,
// runs the handler's Effect, maps errors in one place, writes the reply corked, logs one line
// per request, and shuts down gracefully.
import { randomUUID, timingSafeEqual, createHash } from "node:crypto"
import { Cause, Effect, Exit, Option, type ManagedRuntime } from "effect"
import { Auth } from "../src/auth/Auth.js"
import type { Invalidation, Principal } from "../src/auth/principal.js"
import type { Logger } from "pino"
import type { Config } from "../src/platform/config.js"
import {
  BadRequestBody,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  ShuttingDown,
  Unauthenticated,
  UnsupportedMediaType,
  ValidationFailed,
  type DomainError,
} from "../src/platform/errors.js"
import type { AppServices } from "../src/main/app.layer.js"
import { isStatementTimeout } from "../src/platform/Db.js"
import { DATABASE_TIMEOUT, INTERNAL_ERROR, toHttpError, type HttpError } from "./error-map.js"
import { BodyTooLarge, ClientGone, Exchange, openStream, readBody, sendWhole, type OpenStream } from "./http.js"
import type { Reply } from "./reply.js"
import type { AnyRoute, Method, Part, RequestContext } from "./route.js"
import { clientIp, normaliseIp } from "./client-ip.js"
import { Router, parseQuery, validate } from "./router.js"
import { streamMultipart, type StreamedBody } from "./upload.js"
import { loadUws, type HttpRequest, type HttpResponse, type us_listen_socket } from "./uws.js"

export interface ApiServerOptions {
  readonly config: Config
  readonly log: Logger
  readonly runtime: ManagedRuntime.ManagedRuntime<AppServices, never>
  readonly routes: ReadonlyArray<AnyRoute>
}

export interface ApiServer {
  readonly port: number
  /** Stops accepting, ends open streams, lets in-flight requests finish (up to the timeout), closes. */
  shutdown(): Promise<void>
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const JSON_TYPE = "application/json; charset=utf-8"

interface Incoming {
  readonly method: string
  readonly url: string
  readonly query: string
  readonly headers: Record<string, string>
  readonly remoteAddress: string
  readonly clientIp: string
  readonly requestId: string
}

export async function startApiServer(opts: ApiServerOptions): Promise<ApiServer> {
  const { config, log, runtime } = opts
  const uws = loadUws()
  const router = new Router(opts.routes)
  const app = uws.App()
  const streams = new Set<OpenStream>()
  /** Open streams by the credential they were opened with (see credentialsOf). */
  const streamsByCredential = new Map<string, Set<OpenStream>>()
  let inFlight = 0
  let draining = false
  let idle: (() => void) | undefined

  const systemKeyDigest = config.systemKey === undefined ? undefined : sha256(config.systemKey)
  // Resolved once: per request it is a plain call, and a cached credential answers synchronously.
  const auth = runtime.runSync(Auth)
  // Invalidations reach every api process over the bus (and this one directly): end the streams
  // opened with the credential, so a signed-out session or a revoked key stops receiving at once.
  const stopListening = auth.onInvalidate((inv: Invalidation) => {
    const open = streamsByCredential.get(invalidated(inv))
    if (open === undefined) return
    log.info({ credential: inv.kind, streams: open.size }, "closing streams of an invalidated credential")
    for (const s of [...open]) s.end()
  })

  app.any("/*", (res: HttpResponse, req: HttpRequest) => {
    const started = performance.now()
    // req is only valid until this function returns: copy everything out of it now.
    const headers: Record<string, string> = {}
    req.forEach((k, v) => {
      const prev = headers[k]
      headers[k] = prev === undefined ? v : `${prev}, ${v}`
    })
    const givenId = headers["x-request-id"]
    const remoteAddress = normaliseIp(Buffer.from(res.getRemoteAddressAsText()).toString())
    const incoming: Incoming = {
      method: req.getCaseSensitiveMethod().toUpperCase(),
      url: req.getUrl(),
      query: req.getQuery() ?? "",
      headers,
      remoteAddress,
      clientIp: clientIp(remoteAddress, headers["x-forwarded-for"], config.trustedProxies),
      requestId: givenId !== undefined && REQUEST_ID.test(givenId) ? givenId : randomUUID(),
    }
    const ex = new Exchange(res)
    inFlight++
    handle(ex, incoming)
      .catch((e: unknown) => {
        log.error({ err: e, req_id: incoming.requestId }, "request failed outside its handler")
        sendError(ex, incoming, INTERNAL_ERROR)
      })
      .finally(() => {
        inFlight--
        logRequest(ex, incoming, started)
        if (inFlight === 0) idle?.()
      })
  })

  /**
   * Everything after the synchronous part: the body must be subscribed to before the first await.
   * A route that needs a user or a key learns who is calling before it reads more of the body than
   * came with the headers, and only a multipart body on a multipart route gets the upload limit.
   */
  function handle(ex: Exchange, inc: Incoming): Promise<void> {
    if (draining) return Promise.resolve(sendError(ex, inc, toHttpError(new ShuttingDown()), true))
    const match = router.match(inc.method, inc.url)
    const route = match.kind === "found" ? match.route : undefined
    const multipart = route?.body && "multipart" in route.body ? route.body.multipart : undefined
    const contentType = inc.headers["content-type"] ?? ""
    const isMultipart = contentType.toLowerCase().startsWith("multipart/form-data")
    const limit = multipart && isMultipart ? config.uploadLimitBytes : config.bodyLimitBytes
    const hasBody = inc.headers["transfer-encoding"] !== undefined || Number(inc.headers["content-length"] ?? "0") > 0
    const tooLarge = () => sendError(ex, inc, toHttpError(new PayloadTooLarge({ limitBytes: limit })), true)

    const declared = inc.headers["content-length"] === undefined ? undefined : Number(inc.headers["content-length"])
    if (declared !== undefined && declared > limit) {
      // Refuse without reading: the connection is closed so the unread bytes go with it.
      return Promise.resolve(tooLarge())
    }
    const bodyFailed = (e: unknown): void => {
      if (e instanceof ClientGone) return
      if (e instanceof BodyTooLarge) return tooLarge()
      throw e
    }

    if (match.kind !== "found") {
      // Read (within the JSON limit) so the connection stays usable for the client's next request.
      const answer = () =>
        sendError(
          ex,
          inc,
          toHttpError(match.kind === "not-found" ? new NotFound({ message: `no route for ${inc.method} ${inc.url}` }) : new MethodNotAllowed({ allow: match.allow })),
        )
      return (hasBody ? readBody(ex, limit, declared) : Promise.resolve(EMPTY)).then(answer, bodyFailed)
    }

    const needsUser = match.route.auth === "jwt" || match.route.auth === "jwt-only"
    // uWS hands the body only to a reader attached now, so attach it, paused until the caller is
    // known: an anonymous client cannot make the server take in its upload.
    const held = needsUser && hasBody
    if (held) ex.hold()
    let upload: StreamedBody | undefined
    let body: Promise<Buffer> = Promise.resolve(EMPTY)
    if (multipart === "stream" && hasBody && isMultipart) upload = streamMultipart(ex, contentType, limit)
    else if (hasBody) body = readBody(ex, limit, declared)
    // Observed below; a failure that arrives while the caller is being checked is not unhandled.
    body.catch(() => {})
    const run = (principal: Principal | undefined) => body.then((raw) => dispatch(ex, inc, match.route, match.params, raw, principal, upload), bodyFailed)
    if (!needsUser) return run(undefined)

    const scope = match.route.scope ?? (inc.method === "GET" || inc.method === "HEAD" ? "read" : "write")
    const settle = (principal: Principal | DomainError): Promise<void> => {
      if (held) ex.release()
      // Who is calling comes before what they sent: an unauthenticated caller gets 401, not a
      // lesson in the endpoint's schema. Its unread body goes with the connection.
      if (principal instanceof Error) return Promise.resolve(sendError(ex, inc, toHttpError(principal), hasBody))
      return run(principal)
    }
    const lookupFailed = (e: unknown): void => {
      if (held) ex.release()
      defect(ex, inc, e, hasBody)
    }
    let checked: ReturnType<typeof auth.authenticate>
    try {
      checked = auth.authenticate(inc, { level: match.route.auth as "jwt" | "jwt-only", scope })
    } catch (e) {
      return Promise.resolve(lookupFailed(e))
    }
    // A cached credential answers synchronously: the hot path waits on no promise.
    return checked instanceof Promise ? checked.then(settle, lookupFailed) : settle(checked)
  }

  async function dispatch(
    ex: Exchange,
    inc: Incoming,
    route: AnyRoute,
    rawParams: Record<string, string>,
    raw: Buffer,
    principal: Principal | undefined,
    upload?: StreamedBody,
  ): Promise<void> {
    const program = Effect.suspend(() => {
      const ctx = prepare(inc, route, rawParams, raw, ex, upload)
      if (!("requestId" in ctx)) return Effect.fail(ctx)
      return route.handler({ ...ctx, principal })
    })
    const exit = await runtime.runPromiseExit(program)
    // A streamed body the handler left unread goes with the connection.
    const unread = upload !== undefined && !upload.complete
    if (Exit.isSuccess(exit)) return sendReply(ex, inc, exit.value, unread, principal)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) return sendError(ex, inc, toHttpError(failure.value), unread)
    if (Cause.isInterruptedOnly(exit.cause) && ex.aborted) return
    const [first] = Cause.defects(exit.cause)
    defect(ex, inc, first, unread, Cause.pretty(exit.cause))
  }

  /**
   * A failure no handler expected. A statement Postgres cancelled (statement_timeout, SQLSTATE
   * 57014) is the database being slow, not a bug: 503 with Retry-After; anything else is a 500.
   */
  function defect(ex: Exchange, inc: Incoming, e: unknown, closeConnection: boolean, pretty?: string): void {
    if (isStatementTimeout(e)) {
      log.error({ req_id: inc.requestId, err: e }, "database statement timed out")
      return sendError(ex, inc, DATABASE_TIMEOUT, closeConnection)
    }
    log.error({ req_id: inc.requestId, ...(pretty === undefined ? { err: e } : { cause: pretty }) }, "handler defect")
    sendError(ex, inc, INTERNAL_ERROR, closeConnection)
  }

  /** System auth, content negotiation and validation, in that order; the first failure answers. */
  function prepare(
    inc: Incoming,
    route: AnyRoute,
    rawParams: Record<string, string>,
    raw: Buffer,
    ex: Exchange,
    upload: StreamedBody | undefined,
  ): RequestContext<unknown, unknown, unknown> | DomainError {
    let systemTenantId: number | undefined
    if (route.auth === "system") {
      if (systemKeyDigest === undefined) return new NotFound({ message: `no route for ${inc.method} ${inc.url}` })
      const presented = inc.headers["x-system-key"]
      if (presented === undefined || !timingSafeEqual(sha256(presented), systemKeyDigest))
        return new Unauthenticated({ message: "missing or invalid X-System-Key" })
      const tenant = inc.headers["x-tenant-id"]
      if (tenant !== undefined) {
        if (!/^[1-9]\d{0,15}$/.test(tenant))
          return new ValidationFailed({
            message: "X-Tenant-Id must be a positive integer",
            errors: [{ field: "X-Tenant-Id", message: "must be a positive integer" }],
          })
        systemTenantId = Number(tenant)
      }
    }

    const status = route.validationStatus ?? 422
    const params = route.params ? validate(route.params, rawParams, "params", status) : rawParams
    if (params instanceof ValidationFailed) return params
    const query = route.query ? validate(route.query, parseQuery(inc.query), "query", status) : undefined
    if (query instanceof ValidationFailed) return query

    let body: unknown
    let parts: Part[] | undefined
    const spec = route.body
    if (spec !== undefined && !("raw" in spec)) {
      const type = (inc.headers["content-type"] ?? "").toLowerCase()
      const isJson = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/.test(type)
      const isMultipart = type.startsWith("multipart/form-data")
      if (spec.multipart === "stream" && upload !== undefined) {
        // Handed over as it arrives (see handle); nothing to parse here.
      } else if (spec.multipart === true && isMultipart) {
        const fields = loadUws().getParts(raw, inc.headers["content-type"]!)
        if (fields === undefined)
          return new BadRequestBody({ code: "BAD_MULTIPART", message: "multipart body could not be parsed (check the boundary)" })
        parts = fields.map((f) => ({
          name: f.name,
          data: Buffer.from(f.data.slice(0)),
          filename: f.filename,
          type: f.type,
        }))
      } else if (spec.json !== undefined && (isJson || (raw.length === 0 && type === ""))) {
        let parsed: unknown = undefined
        if (raw.length > 0) {
          try {
            parsed = JSON.parse(raw.toString("utf8"))
          } catch (e) {
            return new BadRequestBody({ code: "BAD_JSON", message: `request body is not valid JSON: ${(e as Error).message}` })
          }
        }
        const valid = validate(spec.json, parsed, "body", status)
        if (valid instanceof ValidationFailed) return valid
        body = valid
      } else {
        const accepted = [spec.json !== undefined && "application/json", spec.multipart && "multipart/form-data"].filter(Boolean)
        return new UnsupportedMediaType({
          message: `content type ${type === "" ? "(none)" : JSON.stringify(type)} is not accepted; send ${accepted.join(" or ")}`,
        })
      }
    }

    return {
      requestId: inc.requestId,
      method: (inc.method === "HEAD" ? "GET" : inc.method) as Method,
      path: inc.url,
      rawQuery: inc.query,
      params,
      query,
      body,
      parts,
      upload,
      rawBody: raw,
      headers: inc.headers,
      remoteAddress: inc.remoteAddress,
      clientIp: inc.clientIp,
      principal: undefined,
      systemTenantId,
      onAbort: (cb) => ex.onAbort(cb),
    }
  }

  function commonHeaders(inc: Incoming): Record<string, string> {
    return draining ? { "X-Request-Id": inc.requestId, Connection: "close" } : { "X-Request-Id": inc.requestId }
  }

  function sendError(ex: Exchange, inc: Incoming, err: HttpError, closeConnection = false): void {
    sendWhole(ex, err.status, JSON_TYPE, JSON.stringify(err.body), err.headers, commonHeaders(inc), {
      head: inc.method === "HEAD",
      closeConnection: closeConnection || draining,
    })
  }

  async function sendReply(ex: Exchange, inc: Incoming, reply: Reply, closeConnection: boolean, principal: Principal | undefined): Promise<void> {
    const head = inc.method === "HEAD"
    switch (reply.kind) {
      case "json":
        return sendWhole(ex, reply.status, JSON_TYPE, JSON.stringify(reply.body), reply.headers, commonHeaders(inc), {
          head,
          closeConnection: closeConnection || draining,
        })
      case "bytes":
        return sendWhole(ex, reply.status, reply.contentType, reply.body, reply.headers, commonHeaders(inc), {
          head,
          closeConnection: closeConnection || draining,
        })
      case "stream": {
        if (!ex.writable) return
        const writer = openStream(ex, reply.status, reply.contentType, reply.headers, commonHeaders(inc))
        if (head) return writer.end()
        streams.add(writer)
        // A stream lives as long as the credential it was opened with: logout or revocation ends it.
        const credentials = principal === undefined ? [] : credentialsOf(principal)
        for (const c of credentials) streamsByCredential.set(c, (streamsByCredential.get(c) ?? new Set()).add(writer))
        writer.onClose(() => {
          streams.delete(writer)
          for (const c of credentials) {
            const set = streamsByCredential.get(c)
            set?.delete(writer)
            if (set?.size === 0) streamsByCredential.delete(c)
          }
        })
        try {
          await reply.run(writer)
        } catch (e) {
          log.error({ err: e, req_id: inc.requestId }, "stream failed")
        } finally {
          writer.end()
        }
        // In flight until uWS has the whole response (for a backed-up client, once its socket
        // takes more): shutdown waits for that before app.close() drops what uWS still holds.
        await writer.finished
        return
      }
    }
  }

  function logRequest(ex: Exchange, inc: Incoming, started: number): void {
    const fields = {
      req_id: inc.requestId,
      method: inc.method,
      path: inc.url,
      status: ex.aborted && !ex.started ? 499 : ex.status,
      ms: Math.round((performance.now() - started) * 100) / 100,
      bytes_out: ex.bytesOut,
      ...(ex.aborted && { aborted: true }),
    }
    if (fields.status >= 500) log.error(fields, "request")
    else log.info(fields, "request")
  }

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (socket) => {
      if (socket) resolve(socket)
      else reject(new Error(`could not listen on ${config.host}:${config.port} (port in use or address unavailable)`))
    })
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
        uws.us_listen_socket_close(listenSocket)
        // Ending a stream stops its producer at once; its request stays in flight until the
        // response is ended, which for a client that is behind waits until its socket takes more
        // (see openStream's end()), so app.close() below does not cut off what it has yet to read.
        for (const s of [...streams]) s.end()
        if (inFlight > 0) {
          const finished = new Promise<void>((r) => (idle = r))
          const timedOut = await Promise.race([finished.then(() => false), delay(config.shutdownTimeoutMs).then(() => true)])
          if (timedOut) log.warn({ in_flight: inFlight }, "shutdown timeout: closing requests still in flight")
        }
        // Closes every socket at once, idle keep-alive ones included, dropping any bytes uWS still
        // buffers for them. close() exists on the native App (v20.30) but is missing from the
        // bundled typings.
        ;(app as typeof app & { close(): void }).close()
        log.info("http closed")
      })()),
  }
}

const EMPTY = Buffer.alloc(0)

/** The names under which a principal's streams are found when one of its credentials is invalidated. */
function credentialsOf(p: Principal): string[] {
  return p.kind === "api_key" ? [`key:${p.keyId}`] : [`session:${p.jti}`, `user:${p.userId}`]
}

function invalidated(inv: Invalidation): string {
  switch (inv.kind) {
    case "session":
      return `session:${inv.jti}`
    case "user":
      return `user:${inv.userId}`
    case "api_key":
      return `key:${inv.keyId}`
  }
}

function sha256(s: string): Buffer {
  return createHash("sha256").update(s).digest()
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref())
}
