// The tagged domain errors: facts a handler can fail with. api/error-map.ts turns each tag into
// a status and a contract code in one place; anything else that escapes is a defect (500).
import { Data } from "effect"

// --- the closed set of codes ------------------------------------------------------------------
// Every `code` an error response can carry is in ERROR_CODES; the OpenAPI document lists them
// and test/http/error-codes.test.ts holds the two together. A new code is added here first.

export const BAD_REQUEST_CODES = [
  "VALIDATION_FAILED",
  "API_KEY_LIMIT_REACHED",
  "CHALLENGE_REQUIRED",
  "CHALLENGE_FAILED",
  "IDENTIFIER_REQUIRED",
  "TOO_MANY_IDENTIFIERS",
  "INVALID_TOKEN",
  "TOKEN_EXPIRED",
  "OAUTH_ONLY_ACCOUNT",
] as const
export type BadRequestCode = (typeof BAD_REQUEST_CODES)[number]

export const BAD_BODY_CODES = ["BAD_JSON", "BAD_MULTIPART", "BAD_REQUEST"] as const
export type BadBodyCode = (typeof BAD_BODY_CODES)[number]

export const UNAUTHENTICATED_CODES = [
  "UNAUTHENTICATED",
  "INVALID_CREDENTIALS",
  "TOKEN_EXPIRED",
  "KEY_REVOKED",
  "KEY_EXPIRED",
  "INVALID_SIGNATURE",
] as const
export type UnauthenticatedCode = (typeof UNAUTHENTICATED_CODES)[number]

export const FORBIDDEN_CODES = [
  "FORBIDDEN",
  "API_KEY_NOT_ALLOWED",
  "CSRF_REJECTED",
  "INSUFFICIENT_SCOPE",
  "INSUFFICIENT_ROLE",
  "ACCOUNT_INACTIVE",
] as const
export type ForbiddenCode = (typeof FORBIDDEN_CODES)[number]

export const CONFLICT_CODES = [
  "CONFLICT",
  "EMAIL_TAKEN",
  "KEY_NOT_REVOKED",
  "SUBSCRIPTION_EXISTS",
  "PAYMENT_METHOD_REQUIRED",
  "BYOK_REQUIRED",
  "MODE_IS_BUNDLED",
  "CREDENTIAL_MISSING",
  "CREDENTIAL_REJECTED",
  "ONBOARDING_INCOMPLETE",
  "NO_NUMBERS_AVAILABLE",
  "NUMBER_UNAVAILABLE",
  "NUMBER_NOT_OWNED",
  "WORKFLOW_LIVE",
  "WORKFLOW_NOT_LIVE",
  "WORKFLOW_NOT_READY",
  "WORKFLOW_RETIRED",
  "RUN_IN_PROGRESS",
  "APPROVAL_EXPIRED",
  "APPROVAL_ALREADY_DECIDED",
  "SIM_CAMPAIGN_LIMIT",
  "SIM_CAMPAIGN_STATE",
  "RECIPIENT_SUPPRESSED",
  "CALL_HANDED_OFF",
  "CALL_NOT_LIVE",
  "CALL_NOT_HEARD",
  "IDEMPOTENCY_IN_PROGRESS",
  "WEBHOOK_ENDPOINT_LIMIT",
  "ALREADY_MEMBER",
  "MEMBER_OF_ANOTHER_WORKSPACE",
  "OWNER_REQUIRED",
  "INVITATION_LIMIT",
  "EXPERIMENT_RUNNING",
  "EXPERIMENT_ENDED",
] as const
export type ConflictCode = (typeof CONFLICT_CODES)[number]

/** The codes of errors with one code each, and of the answers made outside the error types. */
export const FIXED_CODES = [
  "RULE_BOOK_INVALID",
  "IMPORT_INVALID",
  "RATE_LIMITED",
  "INSUFFICIENT_FUNDS",
  "UNSUPPORTED_MEDIA_TYPE",
  "PAYLOAD_TOO_LARGE",
  "NOT_FOUND",
  "METHOD_NOT_ALLOWED",
  "GATEWAY_UNAVAILABLE",
  "ENCRYPTION_UNAVAILABLE",
  "SHUTTING_DOWN",
  "INTERNAL",
  "DATABASE_TIMEOUT",
  "DATABASE_UNAVAILABLE",
  "IDEMPOTENCY_KEY_REUSED",
  "CONSOLE_NOT_BUILT",
] as const

/** Every code an error response can carry, each once. */
export const ERROR_CODES = [
  ...new Set([
    ...BAD_REQUEST_CODES,
    ...BAD_BODY_CODES,
    ...UNAUTHENTICATED_CODES,
    ...FORBIDDEN_CODES,
    ...CONFLICT_CODES,
    ...FIXED_CODES,
  ]),
] as ReadonlyArray<ErrorCode>
export type ErrorCode =
  | BadRequestCode
  | BadBodyCode
  | UnauthenticatedCode
  | ForbiddenCode
  | ConflictCode
  | (typeof FIXED_CODES)[number]

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

/** A row-by-row import with failing rows: nothing was written (422 IMPORT_INVALID). */
export class ImportInvalid extends Data.TaggedError("ImportInvalid")<{
  readonly message: string
  /** Rows numbered as in the file (the CSV header is row 1; a JSON array's first element is 1). */
  readonly errors: ReadonlyArray<{ readonly row: number; readonly field: string; readonly message: string }>
}> {}

/** A request the spec answers with 400 for a reason other than its schema. */
export class BadRequest extends Data.TaggedError("BadRequest")<{
  readonly message: string
  readonly code: BadRequestCode
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
  readonly code: BadBodyCode
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
  readonly code?: UnauthenticatedCode
}> {}

export class Forbidden extends Data.TaggedError("Forbidden")<{
  readonly message: string
  readonly code?: ForbiddenCode
}> {}

export class Conflict extends Data.TaggedError("Conflict")<{
  readonly message: string
  readonly code?: ConflictCode
  readonly details?: Readonly<Record<string, unknown>>
}> {}

/** A payment or other provider could not be reached or refused us (502): worth a retry. */
export class GatewayUnavailable extends Data.TaggedError("GatewayUnavailable")<{
  readonly message: string
}> {}

/** An Idempotency-Key already used for a different request in the workspace (422). */
export class IdempotencyKeyReused extends Data.TaggedError("IdempotencyKeyReused")<{
  readonly message: string
}> {}

export class ShuttingDown extends Data.TaggedError("ShuttingDown")<Record<never, never>> {}

/** Provider secrets cannot be stored: CREDENTIALS_MASTER_KEY is not configured (503). */
export class EncryptionUnavailable extends Data.TaggedError("EncryptionUnavailable")<{
  readonly message: string
}> {}

export type DomainError =
  | ValidationFailed
  | RuleBookInvalid
  | ImportInvalid
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
  | IdempotencyKeyReused

/** Start-up cannot go on (a service unreachable, a role without what it needs); not an HTTP error. */
export class StartupError extends Error {
  override readonly name = "StartupError"
}
