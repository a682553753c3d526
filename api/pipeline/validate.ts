// validate: the route's zod schemas over params, query and the negotiated body, in that
// order; the first failure answers with the contract's 422 (or the route's 400) body.
import type { z } from "zod"
import { type FieldError, ValidationFailed } from "../../src/platform/errors.js"
import type { AnyRoute } from "../route.js"
import type { Negotiated } from "./negotiate.js"

export interface ValidInput {
  readonly params: unknown
  readonly query: unknown
}

/** Params (as matched) and query (as received) checked against the route's schemas. */
export function validateInput(
  route: AnyRoute,
  rawParams: Record<string, string>,
  rawQuery: string,
): ValidInput | ValidationFailed {
  const status = route.validationStatus ?? 422
  const params = route.params ? validate(route.params, rawParams, "params", status) : rawParams
  if (params instanceof ValidationFailed) return params
  const query = route.query ? validate(route.query, parseQuery(rawQuery), "query", status) : undefined
  if (query instanceof ValidationFailed) return query
  return { params, query }
}

/**
 * The JSON body checked against the route's schema (or the ValidationFailed to answer with);
 * undefined when no JSON body came.
 */
export function validateBody(route: AnyRoute, body: Negotiated): unknown {
  if (body.kind !== "json" || route.body === undefined || !("json" in route.body) || route.body.json === undefined)
    return undefined
  const status = route.validationStatus ?? 422
  // PostgreSQL text and jsonb cannot hold U+0000 or a lone surrogate (\ud800): refused here rather
  // than as a database error (a 500) wherever such a string reaches a query. Upload routes (a file,
  // or the same rows as JSON) clean their rows themselves, as they do a file's bytes.
  const bad = route.body.multipart === "stream" ? undefined : unstorableAt(body.value)
  if (bad !== undefined) {
    const message = "must not contain NUL (U+0000) characters or unpaired surrogates"
    const errors = [{ field: bad || "body", message }]
    return new ValidationFailed({ message: `invalid request body: ${summarise(errors)}`, errors, status })
  }
  return validate(route.body.json, body.value, "body", status)
}

/** U+0000, or a surrogate without its other half. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what this looks for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * The path of the first string (value or key) Postgres cannot store in a JSON value, or undefined.
 * A walk with its own stack: JSON.parse builds any depth, and recursion would overflow on a deep one.
 */
function unstorableAt(value: unknown): string | undefined {
  const stack: Array<[unknown, string]> = [[value, ""]]
  const at = (path: string, k: string) => (path === "" ? k : `${path}.${k}`)
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [v, path] = next
    if (typeof v === "string") {
      if (UNSTORABLE.test(v)) return path
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], at(path, String(i))])
    } else if (typeof v === "object" && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        if (UNSTORABLE.test(k)) return at(path, k.replace(new RegExp(UNSTORABLE, "g"), ""))
        stack.push([x, at(path, k)])
      }
    }
  }
  return undefined
}

/** Query string to an object; a key given twice becomes an array. */
export function parseQuery(qs: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  if (qs.length === 0) return out
  for (const [k, v] of new URLSearchParams(qs)) {
    const prev = out[k]
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
  }
  return out
}

/** Validates one part of a request; failures become the contract's 422 body. */
export function validate<T>(
  schema: z.ZodType<T>,
  input: unknown,
  where: "params" | "query" | "body",
  status: 400 | 422 = 422,
): T | ValidationFailed {
  const r = schema.safeParse(input)
  if (r.success) return r.data
  const errors: FieldError[] = r.error.issues.flatMap(unionBranch).map((issue) => ({
    field: issue.path.length > 0 ? issue.path.map(String).join(".") : where,
    message: issue.message,
  }))
  const what = where === "body" ? "request body" : where
  return new ValidationFailed({ message: `invalid ${what}: ${summarise(errors)}`, errors, status })
}

/**
 * A union's failure (POST /internal/turns takes an object or an array): when all but one of its
 * branches failed on the input's type itself, that branch's issues say what is wrong.
 */
function unionBranch(issue: z.core.$ZodIssue): z.core.$ZodIssue[] {
  if (issue.code !== "invalid_union" || !("errors" in issue) || !Array.isArray(issue.errors)) return [issue]
  // A union with a message of its own says it better than any one branch.
  if (issue.message !== "Invalid input") return [issue]
  const branches = (issue.errors as z.core.$ZodIssue[][]).filter(
    (b) => !(b.length === 1 && b[0]!.code === "invalid_type" && b[0]!.path.length === 0),
  )
  if (branches.length !== 1) return [issue]
  return branches[0]!.flatMap(unionBranch).map((i) => ({ ...i, path: [...issue.path, ...i.path] }))
}

function summarise(errors: FieldError[]): string {
  const first = errors[0]
  if (!first) return "invalid"
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : ""
  return `${first.field}: ${first.message}${more}`
}
