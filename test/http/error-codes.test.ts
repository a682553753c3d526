// The closed set of error codes: the OpenAPI document lists exactly ERROR_CODES, every error the
// error map can produce carries one of them, and every declared code is produced by some error.
import { describe, expect, it } from "vitest"
import {
  consoleNotBuilt,
  DATABASE_TIMEOUT,
  DATABASE_UNAVAILABLE,
  ERROR_CODES,
  type ErrorCode,
  INTERNAL_ERROR,
  toHttpError,
} from "../../api/error-map.js"
import { openApiDocument } from "../../api/openapi.js"
import { routeTable } from "../../api/routes/index.js"
import {
  BAD_BODY_CODES,
  BAD_REQUEST_CODES,
  BadRequest,
  BadRequestBody,
  CONFLICT_CODES,
  Conflict,
  type DomainError,
  EncryptionUnavailable,
  FORBIDDEN_CODES,
  Forbidden,
  GatewayUnavailable,
  IdempotencyKeyReused,
  ImportInvalid,
  InsufficientFunds,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  RateLimited,
  RuleBookInvalid,
  ShuttingDown,
  UNAUTHENTICATED_CODES,
  Unauthenticated,
  UnsupportedMediaType,
  ValidationFailed,
} from "../../src/platform/errors.js"

const message = "m"
const fieldErrors = [{ field: "f", message }]

// One entry per tag (the type check fails when a DomainError has none), each with every code it can carry.
const everyError: { readonly [T in DomainError["_tag"]]: ReadonlyArray<Extract<DomainError, { _tag: T }>> } = {
  ValidationFailed: [
    new ValidationFailed({ message, errors: fieldErrors }),
    new ValidationFailed({ message, errors: [], status: 400 }),
  ],
  RuleBookInvalid: [new RuleBookInvalid({ message, errors: fieldErrors })],
  ImportInvalid: [new ImportInvalid({ message, errors: [{ row: 2, field: "bucket", message }] })],
  BadRequest: BAD_REQUEST_CODES.map((code) => new BadRequest({ message, code })),
  RateLimited: [new RateLimited({ message, retryAfterSeconds: 3 })],
  InsufficientFunds: [new InsufficientFunds({ message, balanceMinor: 1, requiredMinor: 2 })],
  BadRequestBody: BAD_BODY_CODES.map((code) => new BadRequestBody({ message, code })),
  UnsupportedMediaType: [new UnsupportedMediaType({ message })],
  PayloadTooLarge: [new PayloadTooLarge({ limitBytes: 10 })],
  NotFound: [new NotFound({ message })],
  MethodNotAllowed: [new MethodNotAllowed({ allow: ["GET"] })],
  Unauthenticated: [
    new Unauthenticated({ message }),
    ...UNAUTHENTICATED_CODES.map((code) => new Unauthenticated({ message, code })),
  ],
  Forbidden: [new Forbidden({ message }), ...FORBIDDEN_CODES.map((code) => new Forbidden({ message, code }))],
  Conflict: [
    new Conflict({ message }),
    ...CONFLICT_CODES.map((code) => new Conflict({ message, code, details: { status: "x" } })),
  ],
  ShuttingDown: [new ShuttingDown()],
  GatewayUnavailable: [new GatewayUnavailable({ message })],
  EncryptionUnavailable: [new EncryptionUnavailable({ message })],
  IdempotencyKeyReused: [new IdempotencyKeyReused({ message })],
}

const produced = (): ErrorCode[] => [
  ...Object.values(everyError)
    .flat()
    .map((e) => toHttpError(e as DomainError).body.code),
  INTERNAL_ERROR.body.code,
  DATABASE_TIMEOUT.body.code,
  DATABASE_UNAVAILABLE.body.code,
  consoleNotBuilt("no build").body.code,
]

describe("error codes", () => {
  it("are listed once each", () => {
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length)
    for (const c of ERROR_CODES) expect(c).toMatch(/^[A-Z][A-Z0-9_]*$/)
  })

  it("the OpenAPI document's ErrorCode enum is exactly the union's members, and the error body refers to it", () => {
    const doc = openApiDocument(routeTable()) as { components: { schemas: Record<string, any> } }
    const schema = doc.components.schemas["ErrorCode"]
    expect(schema.type).toBe("string")
    expect([...schema.enum].sort()).toEqual([...ERROR_CODES].sort())
    expect(doc.components.schemas["Error"].properties.code).toEqual({ $ref: "#/components/schemas/ErrorCode" })
  })

  it("every error the error map can produce carries a listed code", () => {
    const listed = new Set<string>(ERROR_CODES)
    for (const code of produced()) expect(listed.has(code), code).toBe(true)
  })

  it("every listed code is produced by some error", () => {
    const made = new Set<string>(produced())
    expect(ERROR_CODES.filter((c) => !made.has(c))).toEqual([])
  })
})
