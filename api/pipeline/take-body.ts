// takeBody: attaches the body's reader. uWS hands the body only to a reader attached in the
// synchronous part of the handler, so this runs there: a whole buffer, or a streamed multipart form.
import { type Exchange, readBody } from "../http.js"
import { type StreamedBody, streamMultipart } from "../upload.js"
import type { BodyPlan } from "./body-limit.js"

export interface TakenBody {
  /** The whole body (empty for a streamed one or none); rejects BodyTooLarge or ClientGone. */
  readonly raw: Promise<Buffer>
  /** The streamed multipart body, when the plan says so. */
  readonly upload: StreamedBody | undefined
}

const EMPTY = Buffer.alloc(0)
const NO_BODY: TakenBody = { raw: Promise.resolve(EMPTY), upload: undefined }

/** Starts reading the body as the plan says (call it synchronously in the uWS handler). */
export function takeBody(ex: Exchange, plan: BodyPlan): TakenBody {
  if (plan.streamed)
    return { raw: Promise.resolve(EMPTY), upload: streamMultipart(ex, plan.contentType, plan.limit, plan.form) }
  if (!plan.hasBody) return NO_BODY
  const raw = readBody(ex, plan.limit, plan.declared)
  // Observed later; a failure that arrives while the caller is being checked is not unhandled.
  raw.catch(() => {})
  return { raw, upload: undefined }
}
