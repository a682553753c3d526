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
  /** 422 unless the spec names another status for the route (API-key create: 400). */
  readonly status?: 400 | 422
}> {}

/** A rule book (generated or edited) failed the schema or the semantic checks (422 RULE_BOOK_INVALID). */
export class RuleBookInvalid extends Data.TaggedError("RuleBookInvalid")<{
  readonly message: string
  readonly errors: ReadonlyArray<FieldError>
}> {}

/** A request the spec answers with 400 for a reason other than its schema. */
export class BadRequest extends Data.TaggedError("BadRequest")<{
  readonly message: string
  readonly code: string
  readonly field?: string
}> {}

export class RateLimited extends Data.TaggedError("RateLimited")<{
  readonly message: string
  readonly retryAfterSeconds: number
}> {}

/** The wallet cannot pay for what was asked (402). */
export class InsufficientFunds extends Data.TaggedError("InsufficientFunds")<{
  readonly message: string
  readonly balanceMinor: number
  readonly requiredMinor: number
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
  readonly code?: "UNAUTHENTICATED" | "INVALID_CREDENTIALS" | "TOKEN_EXPIRED" | "KEY_REVOKED" | "KEY_EXPIRED" | "INVALID_SIGNATURE"
}> {}

export class Forbidden extends Data.TaggedError("Forbidden")<{
  readonly message: string
  readonly code?: "FORBIDDEN" | "API_KEY_NOT_ALLOWED" | "CSRF_REJECTED" | "INSUFFICIENT_SCOPE" | "ACCOUNT_INACTIVE"
}> {}

export class Conflict extends Data.TaggedError("Conflict")<{
  readonly message: string
  readonly code?: string
  readonly details?: Readonly<Record<string, unknown>>
}> {}

/** A payment or other provider could not be reached or refused us (502): worth a retry. */
export class GatewayUnavailable extends Data.TaggedError("GatewayUnavailable")<{
  readonly message: string
}> {}

export class ShuttingDown extends Data.TaggedError("ShuttingDown")<{}> {}

/** Provider secrets cannot be stored: CREDENTIALS_MASTER_KEY is not configured (503). */
export class EncryptionUnavailable extends Data.TaggedError("EncryptionUnavailable")<{
  readonly message: string
}> {}

export type DomainError =
  | ValidationFailed
  | RuleBookInvalid
  | BadRequest
  | RateLimited
  | InsufficientFunds
  | BadRequestBody
  | UnsupportedMediaType
  | PayloadTooLarge
  | NotFound
  | MethodNotAllowed
  | Unauthenticated
  | Forbidden
  | Conflict
  | ShuttingDown
  | GatewayUnavailable
  | EncryptionUnavailable

/** Start-up cannot go on (a service unreachable, a role without what it needs); not an HTTP error. */
export class StartupError extends Error {
  override readonly name = "StartupError"
}
