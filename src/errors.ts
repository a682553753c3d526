// The tagged domain errors: facts a handler can fail with. api/error-map.ts turns each tag into
// a status and a contract code in one place; anything else that escapes is a defect (500).
import { Data } from "effect"

export interface FieldError {
  readonly field: string
  readonly message: string
}

/** A request did not match its declared schema (422 VALIDATION_FAILED). */
export class ValidationFailed extends Data.TaggedError("ValidationFailed")<{
  readonly message: string
  readonly errors: ReadonlyArray<FieldError>
}> {}

/** The body could not be read as the content type it declared (400 BAD_JSON and friends). */
export class BadRequestBody extends Data.TaggedError("BadRequestBody")<{
  readonly message: string
  readonly code: "BAD_JSON" | "BAD_MULTIPART" | "BAD_REQUEST"
}> {}

export class UnsupportedMediaType extends Data.TaggedError("UnsupportedMediaType")<{
  readonly message: string
}> {}

export class PayloadTooLarge extends Data.TaggedError("PayloadTooLarge")<{
  readonly limitBytes: number
}> {}

/** No such resource in the caller's workspace (another tenant's resource is also this). */
export class NotFound extends Data.TaggedError("NotFound")<{
  readonly message: string
}> {}

export class MethodNotAllowed extends Data.TaggedError("MethodNotAllowed")<{
  readonly allow: ReadonlyArray<string>
}> {}

export class Unauthenticated extends Data.TaggedError("Unauthenticated")<{
  readonly message: string
}> {}

export class Forbidden extends Data.TaggedError("Forbidden")<{
  readonly message: string
  readonly code?: "FORBIDDEN" | "API_KEY_NOT_ALLOWED" | "CSRF_REJECTED"
}> {}

export class Conflict extends Data.TaggedError("Conflict")<{
  readonly message: string
  readonly code?: string
  readonly details?: Readonly<Record<string, unknown>>
}> {}

export class ShuttingDown extends Data.TaggedError("ShuttingDown")<{}> {}

export type DomainError =
  | ValidationFailed
  | BadRequestBody
  | UnsupportedMediaType
  | PayloadTooLarge
  | NotFound
  | MethodNotAllowed
  | Unauthenticated
  | Forbidden
  | Conflict
  | ShuttingDown

/** Start-up cannot go on (a service unreachable, a role without what it needs); not an HTTP error. */
export class StartupError extends Error {
  override readonly name = "StartupError"
}
