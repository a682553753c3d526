// negotiate: the body's content type against what the route takes: JSON parsed (BAD_JSON when it
// is not, 422 when nested too deep), multipart parts split (BAD_MULTIPART), anything else 415.
// Validation comes next.
import { BadRequestBody, UnsupportedMediaType, type ValidationFailed } from "../../src/platform/errors.js"
import { jsonBody } from "../../src/platform/json.js"
import type { BodySpec, Part } from "../route.js"
import { loadUws } from "../uws.js"

/** The body as the route will see it, before validation. */
export type Negotiated =
  /** Nothing to parse: the route takes no body, takes raw bytes, or is handed a streamed upload. */
  | { readonly kind: "none" }
  /** Parsed JSON (undefined for an empty body), still to be validated. */
  | { readonly kind: "json"; readonly value: unknown }
  | { readonly kind: "parts"; readonly parts: Part[] }

export const NOTHING: Negotiated = { kind: "none" }
const EMPTY_JSON: Negotiated = { kind: "json", value: undefined }
const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/

/**
 * Reads `raw` as the route's body spec says. `contentType` is the header as sent; `streaming` is
 * true when the body is being streamed to the handler (see takeBody).
 */
export function negotiate(
  spec: BodySpec<unknown> | undefined,
  contentType: string | undefined,
  raw: Buffer,
  streaming: boolean,
): Negotiated | BadRequestBody | UnsupportedMediaType | ValidationFailed {
  if (spec === undefined || "raw" in spec) return NOTHING
  const type = (contentType ?? "").toLowerCase()
  const isJson = JSON_TYPE.test(type)
  const isMultipart = type.startsWith("multipart/form-data")
  if (spec.multipart === "stream" && streaming) return NOTHING
  if (spec.multipart === true && isMultipart) {
    const fields = loadUws().getParts(raw, contentType!)
    if (fields === undefined)
      return new BadRequestBody({
        code: "BAD_MULTIPART",
        message: "multipart body could not be parsed (check the boundary)",
      })
    const parts = fields.map((f) => ({
      name: f.name,
      data: Buffer.from(f.data.slice(0)),
      filename: f.filename,
      type: f.type,
    }))
    return { kind: "parts", parts }
  }
  if (spec.json !== undefined && (isJson || (raw.length === 0 && type === ""))) {
    if (raw.length === 0) return EMPTY_JSON
    // Nested too deep is refused here, before zod, a handler or the database driver (all of them
    // recursive) walks the value.
    const parsed = jsonBody(raw.toString("utf8"), "request body")
    return parsed instanceof Error ? parsed : { kind: "json", value: parsed.value }
  }
  const accepted = [spec.json !== undefined && "application/json", spec.multipart && "multipart/form-data"]
  const sent = type === "" ? "(none)" : JSON.stringify(type)
  return new UnsupportedMediaType({
    message: `content type ${sent} is not accepted; send ${accepted.filter(Boolean).join(" or ")}`,
  })
}
