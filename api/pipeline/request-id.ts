// requestId: the caller's X-Request-Id when it is a plain token, otherwise a fresh UUID.
// Every reply carries it back and every log line of the request names it.
import { randomUUID } from "node:crypto"

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** The id this request goes by: `given` (the X-Request-Id header) if acceptable, else a new UUID. */
export function requestId(given: string | undefined): string {
  return given !== undefined && REQUEST_ID.test(given) ? given : randomUUID()
}
