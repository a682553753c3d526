// respond: writes the answer through api/http.ts (corked, HEAD without a body, the
// connection closed when asked or when draining): a JSON error, a whole reply, or a stream.
import type { Logger } from "pino"
import type { Principal } from "../../src/auth/principal.js"
import { isConnectionError, isStatementTimeout } from "../../src/platform/Db.js"
import { trackSse } from "../../src/platform/http.metrics.js"
import type { Cached } from "../../src/platform/workspace-reads.js"
import { DATABASE_TIMEOUT, DATABASE_UNAVAILABLE, type HttpError, INTERNAL_ERROR } from "../error-map.js"
import { type Exchange, openStream, sendWhole } from "../http.js"
import type { Headers, Reply } from "../reply.js"
import type { Incoming } from "./incoming.js"
import type { OpenStreams } from "./open-streams.js"

const JSON_TYPE = "application/json; charset=utf-8"

export interface Respond {
  /** A JSON error body. */
  error(ex: Exchange, inc: Incoming, err: HttpError, closeConnection?: boolean): void
  /** A failure no handler expected: logged with the request id, then 503 or 500 (see defectError). */
  defect(ex: Exchange, inc: Incoming, e: unknown, closeConnection: boolean, pretty?: string): void
  /** A kept answer of a cached list (api/pipeline/cached-reads.ts), 200. */
  kept(ex: Exchange, inc: Incoming, answer: Cached): void
  /** The handler's reply; a stream settles once uWS has all of it (or the client is gone). */
  reply(
    ex: Exchange,
    inc: Incoming,
    reply: Reply,
    closeConnection: boolean,
    principal: Principal | undefined,
  ): Promise<void>
}

export interface RespondOptions {
  readonly log: Logger
  /** True once shutdown began: every reply then closes its connection. */
  readonly draining: () => boolean
  readonly streams: OpenStreams
}

/** Headers every reply carries. */
export function commonHeaders(requestId: string, draining: boolean): Headers {
  return draining ? { "X-Request-Id": requestId, Connection: "close" } : { "X-Request-Id": requestId }
}

/**
 * The answer to a defect. A statement Postgres cancelled (statement_timeout, SQLSTATE 57014) is
 * the database being slow, not a bug: 503 with Retry-After; so is a database out of reach (a
 * restart: 503 DATABASE_UNAVAILABLE); anything else is a 500.
 */
export function defectError(e: unknown): HttpError {
  if (isConnectionError(e)) return DATABASE_UNAVAILABLE
  return isStatementTimeout(e) ? DATABASE_TIMEOUT : INTERNAL_ERROR
}

export function respond({ log, draining, streams }: RespondOptions): Respond {
  const whole = (
    ex: Exchange,
    inc: Incoming,
    status: number,
    type: string,
    body: string | Uint8Array,
    headers: Headers | undefined,
    close: boolean,
  ) =>
    sendWhole(ex, status, type, body, headers, commonHeaders(inc.requestId, draining()), {
      head: inc.method === "HEAD",
      closeConnection: close || draining(),
    })

  const error = (ex: Exchange, inc: Incoming, err: HttpError, closeConnection = false): void =>
    whole(ex, inc, err.status, JSON_TYPE, JSON.stringify(err.body), err.headers, closeConnection)

  return {
    error,
    kept: (ex, inc, answer) => whole(ex, inc, 200, answer.contentType, answer.body, undefined, false),
    defect(ex, inc, e, closeConnection, pretty) {
      const answer = defectError(e)
      if (answer === DATABASE_TIMEOUT) log.error({ req_id: inc.requestId, err: e }, "database statement timed out")
      else if (answer === DATABASE_UNAVAILABLE) log.warn({ req_id: inc.requestId, err: e }, "database unavailable")
      else {
        const detail = pretty === undefined ? { err: e } : { cause: pretty }
        log.error({ req_id: inc.requestId, ...detail }, "handler defect")
      }
      error(ex, inc, answer, closeConnection)
    },
    async reply(ex, inc, reply, closeConnection, principal) {
      switch (reply.kind) {
        case "json":
          return whole(ex, inc, reply.status, JSON_TYPE, JSON.stringify(reply.body), reply.headers, closeConnection)
        case "bytes":
          return whole(ex, inc, reply.status, reply.contentType, reply.body, reply.headers, closeConnection)
        case "stream": {
          if (!ex.writable) return
          const common = commonHeaders(inc.requestId, draining())
          const writer = openStream(ex, reply.status, reply.contentType, reply.headers, common)
          if (inc.method === "HEAD") return writer.end()
          // A stream lives as long as the credential it was opened with: logout or revocation ends it,
          // and an event stream (no end of its own) also ends when the credential expires. A download
          // started in time runs to its end: cut there, it would look whole.
          const events = reply.contentType.startsWith("text/event-stream")
          streams.add(writer, principal, { endAtExpiry: events })
          if (events) trackSse(writer)
          try {
            await reply.run(writer)
            writer.end()
          } catch (e) {
            // The status went out long ago: all that is left to say is that the body is not whole.
            log.error({ err: e, req_id: inc.requestId }, "stream failed")
            writer.abort()
          }
          // In flight until uWS has the whole response (for a backed-up client, once its socket
          // takes more): shutdown waits for that before app.close() drops what uWS still holds.
          await writer.finished
          return
        }
      }
    },
  }
}
