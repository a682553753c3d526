// systemKey: the check of a `system` route's caller: the deployment's SYSTEM_KEY in
// X-System-Key (compared in constant time), and an optional X-Tenant-Id to act for.
import { createHash, timingSafeEqual } from "node:crypto"
import { type DomainError, NotFound, Unauthenticated, ValidationFailed } from "../../src/platform/errors.js"

export interface SystemRequest {
  readonly method: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}

/** The X-Tenant-Id the caller acts for (undefined: none sent), or why it is refused. */
export type SystemCheck = (req: SystemRequest) => number | undefined | DomainError

const TENANT_ID = /^[1-9]\d{0,15}$/

/** The check for a deployment whose key is `key`; with no key, system routes do not exist (404). */
export function systemKey(key: string | undefined): SystemCheck {
  const digest = key === undefined ? undefined : sha256(key)
  return function checkSystemKey(req) {
    if (digest === undefined) return new NotFound({ message: `no route for ${req.method} ${req.url}` })
    const presented = req.headers["x-system-key"]
    if (presented === undefined || !timingSafeEqual(sha256(presented), digest))
      return new Unauthenticated({ message: "missing or invalid X-System-Key" })
    const tenant = req.headers["x-tenant-id"]
    if (tenant === undefined) return undefined
    if (!TENANT_ID.test(tenant))
      return new ValidationFailed({
        message: "X-Tenant-Id must be a positive integer",
        errors: [{ field: "X-Tenant-Id", message: "must be a positive integer" }],
      })
    return Number(tenant)
  }
}

function sha256(s: string): Buffer {
  return createHash("sha256").update(s).digest()
}
