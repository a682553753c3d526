// The request as the pipeline sees it: everything copied out of uWS's req in the synchronous part
// of the handler (req is invalid once it returns), with its request id and client address settled.
import type { HttpRequest, HttpResponse } from "../uws.js"
import { clientAddress } from "./client-address.js"
import { requestId } from "./request-id.js"

export interface Incoming {
  /** Upper-cased. */
  readonly method: string
  /** The raw path, without the query string. */
  readonly url: string
  /** The query string as received, without the "?". */
  readonly query: string
  /** Header names lower-cased; repeated headers joined with ", ". */
  readonly headers: Record<string, string>
  readonly remoteAddress: string
  readonly clientIp: string
  readonly requestId: string
}

/** Copies the request out of uWS: call it first, synchronously, inside the uWS handler. */
export function readIncoming(req: HttpRequest, res: HttpResponse, trustedProxies: readonly string[]): Incoming {
  const headers: Record<string, string> = {}
  req.forEach((k, v) => {
    const prev = headers[k]
    headers[k] = prev === undefined ? v : `${prev}, ${v}`
  })
  const peer = Buffer.from(res.getRemoteAddressAsText()).toString()
  const address = clientAddress(peer, headers["x-forwarded-for"], trustedProxies)
  return {
    method: req.getCaseSensitiveMethod().toUpperCase(),
    url: req.getUrl(),
    query: req.getQuery() ?? "",
    headers,
    remoteAddress: address.remoteAddress,
    clientIp: address.clientIp,
    requestId: requestId(headers["x-request-id"]),
  }
}
