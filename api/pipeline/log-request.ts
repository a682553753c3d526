// logRequest: one line per request once it is over: id, method, path, status (499 when
// the client left before any reply), time, bytes out, body bytes in (when any); 5xx at error level, the rest at info.
import type { Logger } from "pino"
import type { Incoming } from "./incoming.js"

/** What the exchange knows once the request is over (api/http.ts's Exchange). */
export interface Finished {
  readonly aborted: boolean
  readonly started: boolean
  readonly status: number
  readonly bytesOut: number
  readonly bytesIn: number
}

export interface RequestLine {
  readonly req_id: string
  readonly method: string
  readonly path: string
  readonly status: number
  readonly ms: number
  readonly bytes_out: number
  readonly bytes_in?: number
  readonly aborted?: true
}

/** The log line's fields for a request that took `ms` milliseconds. */
export function requestLine(ex: Finished, inc: Incoming, ms: number): RequestLine {
  return {
    req_id: inc.requestId,
    method: inc.method,
    path: inc.url,
    status: ex.aborted && !ex.started ? 499 : ex.status,
    ms: Math.round(ms * 100) / 100,
    bytes_out: ex.bytesOut,
    ...(ex.bytesIn > 0 && { bytes_in: ex.bytesIn }),
    ...(ex.aborted && { aborted: true }),
  }
}

/** Logs the request that started at `started` (performance.now()). */
export function logRequest(log: Logger, ex: Finished, inc: Incoming, started: number): void {
  const fields = requestLine(ex, inc, performance.now() - started)
  if (fields.status >= 500) log.error(fields, "request")
  else log.info(fields, "request")
}
