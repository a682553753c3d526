// The one table from domain errors to HTTP: status, contract code and body {error, code, field?}.
// Adding a DomainError without a row here fails the type check (assertNever).
import type { DomainError, ErrorCode } from "../src/platform/errors.js"

export { ERROR_CODES, type ErrorCode } from "../src/platform/errors.js"

export interface HttpError {
  readonly status: number
  readonly body: { error: string; code: ErrorCode; field?: string; [extra: string]: unknown }
  readonly headers?: Readonly<Record<string, string>>
}

function assertNever(x: never): never {
  throw new Error(`unmapped error ${JSON.stringify(x)}`)
}

export function toHttpError(e: DomainError): HttpError {
  switch (e._tag) {
    case "ValidationFailed": {
      const first = e.errors[0]
      return {
        status: e.status ?? 422,
        body: {
          error: e.message,
          code: "VALIDATION_FAILED",
          ...(first && { field: first.field }),
          errors: e.errors.map((x) => ({ field: x.field, message: x.message })),
        },
      }
    }
    case "BadRequest":
      return { status: 400, body: { error: e.message, code: e.code, ...(e.field !== undefined && { field: e.field }) } }
    case "RateLimited":
      return {
        status: 429,
        body: { error: e.message, code: "RATE_LIMITED", retry_after_seconds: e.retryAfterSeconds },
        headers: { "Retry-After": String(e.retryAfterSeconds) },
      }
    case "InsufficientFunds":
      return {
        status: 402,
        body: {
          error: e.message,
          code: "INSUFFICIENT_FUNDS",
          balance_minor: e.balanceMinor,
          required_minor: e.requiredMinor,
        },
      }
    case "BadRequestBody":
      return { status: 400, body: { error: e.message, code: e.code } }
    case "UnsupportedMediaType":
      return { status: 415, body: { error: e.message, code: "UNSUPPORTED_MEDIA_TYPE" } }
    case "PayloadTooLarge":
      return {
        status: 413,
        body: {
          error: `request body is larger than ${e.limitBytes} bytes`,
          code: "PAYLOAD_TOO_LARGE",
          limit_bytes: e.limitBytes,
        },
      }
    case "NotFound":
      return { status: 404, body: { error: e.message, code: "NOT_FOUND" } }
    case "MethodNotAllowed":
      return {
        status: 405,
        body: { error: `method not allowed; allowed: ${e.allow.join(", ")}`, code: "METHOD_NOT_ALLOWED" },
        headers: { Allow: e.allow.join(", ") },
      }
    case "Unauthenticated":
      return { status: 401, body: { error: e.message, code: e.code ?? "UNAUTHENTICATED" } }
    case "Forbidden":
      return { status: 403, body: { error: e.message, code: e.code ?? "FORBIDDEN" } }
    case "ImportInvalid":
      return {
        status: 422,
        body: {
          error: e.message,
          code: "IMPORT_INVALID",
          ...(e.errors[0] && { field: e.errors[0].field }),
          errors: e.errors.map((x) => ({ row: x.row, field: x.field, message: x.message })),
        },
      }
    case "RuleBookInvalid": {
      const first = e.errors[0]
      return {
        status: 422,
        body: {
          error: e.message,
          code: "RULE_BOOK_INVALID",
          ...(first && { field: first.field }),
          errors: e.errors.map((x) => ({ field: x.field, message: x.message })),
        },
      }
    }
    case "Conflict":
      return { status: 409, body: { error: e.message, code: e.code ?? "CONFLICT", ...e.details } }
    case "GatewayUnavailable":
      return { status: 502, body: { error: e.message, code: "GATEWAY_UNAVAILABLE" }, headers: { "Retry-After": "5" } }
    case "IdempotencyKeyReused":
      return { status: 422, body: { error: e.message, code: "IDEMPOTENCY_KEY_REUSED" } }
    case "EncryptionUnavailable":
      return { status: 503, body: { error: e.message, code: "ENCRYPTION_UNAVAILABLE" } }
    case "ShuttingDown":
      return {
        status: 503,
        body: { error: "server is shutting down; retry", code: "SHUTTING_DOWN" },
        headers: { "Retry-After": "1" },
      }
    default:
      return assertNever(e)
  }
}

export const INTERNAL_ERROR: HttpError = {
  status: 500,
  body: { error: "internal error", code: "INTERNAL" },
}

/** A compiled install without the console's build (api/console/): the API is up, its page is not. */
export const consoleNotBuilt = (message: string): HttpError => ({
  status: 503,
  body: { error: message, code: "CONSOLE_NOT_BUILT" },
  headers: { "Retry-After": "3600" },
})

/** The database is out of reach (a restart, a failover): retry later (docs/operations.md). */
export const DATABASE_UNAVAILABLE: HttpError = {
  status: 503,
  body: { error: "the database is unavailable; retry shortly", code: "DATABASE_UNAVAILABLE" },
  headers: { "Retry-After": "5" },
}

/** A statement the database cancelled (statement_timeout): the database is slow, retry later. */
export const DATABASE_TIMEOUT: HttpError = {
  status: 503,
  body: { error: "the database took too long to answer; retry shortly", code: "DATABASE_TIMEOUT" },
  headers: { "Retry-After": "5" },
}
