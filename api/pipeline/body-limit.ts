// bodyLimit: how much body a request may send (the upload limit for a multipart body to a
// multipart route and for a raw upload route, the JSON limit otherwise), refusing at once a
// length declared over it.
import { PayloadTooLarge } from "../../src/platform/errors.js"
import type { FormSpec } from "../form.js"
import type { AnyRoute } from "../route.js"

export interface Limits {
  readonly bodyLimitBytes: number
  readonly uploadLimitBytes: number
}

/** What the request's headers say about its body, and how it is to be taken. */
export interface BodyPlan {
  /** The Content-Type header as sent ("" when absent). */
  readonly contentType: string
  readonly isMultipart: boolean
  /** Bytes accepted before the request is refused with 413. */
  readonly limit: number
  /** Content-Length, when sent. */
  readonly declared: number | undefined
  /** A body is coming (a positive Content-Length, or Transfer-Encoding). */
  readonly hasBody: boolean
  /** The body goes to the handler as it arrives (a multipart body to a `multipart: "stream"` route). */
  readonly streamed: boolean
  /** The parts a streamed form must have, as the route declares them. */
  readonly form: FormSpec | undefined
}

/**
 * The body plan for a request to `route` (undefined: no route matched), or PayloadTooLarge when
 * the declared length is over the limit: that one is refused without reading.
 */
export function bodyLimit(
  route: AnyRoute | undefined,
  headers: Readonly<Record<string, string>>,
  limits: Limits,
): BodyPlan | PayloadTooLarge {
  const multipart = route?.body && "multipart" in route.body ? route.body.multipart : undefined
  const contentType = headers["content-type"] ?? ""
  const isMultipart = contentType.toLowerCase().startsWith("multipart/form-data")
  const rawUpload = route?.body && "raw" in route.body && route.body.limit === "upload"
  const limit = (multipart && isMultipart) || rawUpload ? limits.uploadLimitBytes : limits.bodyLimitBytes
  const length = headers["content-length"]
  const declared = length === undefined ? undefined : Number(length)
  if (declared !== undefined && declared > limit) return new PayloadTooLarge({ limitBytes: limit })
  const hasBody = headers["transfer-encoding"] !== undefined || Number(length ?? "0") > 0
  const streamed = multipart === "stream" && hasBody && isMultipart
  const form = streamed && route?.body && "form" in route.body ? route.body.form : undefined
  return { contentType, isMultipart, limit, declared, hasBody, streamed, form }
}
