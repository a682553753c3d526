// Zod pieces shared by route schemas: path ids, booleans and integers as they arrive in a query
// string (z.coerce.boolean would read "false" as true), and the error bodies for OpenAPI.
import { z } from "zod"
import { internationalE164 } from "../src/phones/phone.js"
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, parseListCursor } from "../src/platform/page.cursor.js"
import { cleanWorkspaceName, WORKSPACE_NAME_MAX } from "../src/workspaces/workspace-name.js"

/** A positive integer id in a path segment: "12" → 12; "abc", "1.5", "-3", "007x" are refused. */
export const Id = z
  .string()
  .regex(/^[1-9]\d{0,15}$/, "must be a positive integer")
  .transform(Number)

export const QueryBool = z
  .enum(["true", "false", "1", "0"], { error: "must be true or false" })
  .transform((v) => v === "true" || v === "1")

export const QueryInt = (min: number, max: number) =>
  z
    .string()
    .regex(/^-?\d+$/, "must be an integer")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))

/** `limit` of a cursor-paged list: 1–200, 50 when absent. */
export const PageLimit = QueryInt(1, LIST_MAX_LIMIT)
  .default(LIST_DEFAULT_LIMIT)
  .describe(`rows per page, 1–${LIST_MAX_LIMIT} (default ${LIST_DEFAULT_LIMIT})`)

/** `cursor` of a cursor-paged list: the `next_cursor` of the page before, taken back as is. */
export const PageCursor = z
  .string()
  .max(80, "must be a next_cursor from the previous page")
  .transform((raw, ctx) => {
    const before = parseListCursor(raw)
    if (before === undefined) ctx.addIssue({ code: "custom", message: "must be a next_cursor from the previous page" })
    return before ?? z.NEVER
  })
  .describe("the next_cursor of the previous page, as given (opaque)")

/** An email address, trimmed and lower-cased: accounts are found by it case-insensitively. */
export const Email = z
  .string()
  .trim()
  .max(254, "must be at most 254 characters")
  .pipe(z.email("must be an email address"))
  .transform((e) => e.toLowerCase())

/**
 * A phone number in international form, as E.164: "+1 (202) 555-0189" → "+12025550189"; valid by
 * libphonenumber's full metadata (src/phones/phone.ts), so "+1555" or "call me" are refused.
 */
export const E164Phone = z
  .string({ error: "must be a phone number in international form, such as +14155550100" })
  .max(40, "must be a phone number in international form, such as +14155550100")
  .transform((raw, ctx) => {
    const e164 = internationalE164(raw)
    if (e164 === undefined)
      ctx.addIssue({ code: "custom", message: "must be a phone number in international form, such as +14155550100" })
    return e164 ?? z.NEVER
  })
  .describe("an E.164 phone number (+ and the country code; spaces, dashes and brackets are ignored)")

export const ErrorBody = z.object({
  error: z.string(),
  code: z.string().regex(/^[A-Z][A-Z0-9_]*$/),
  field: z.string().optional(),
})

export const ValidationErrorBody = ErrorBody.extend({
  code: z.literal("VALIDATION_FAILED"),
  errors: z.array(z.object({ field: z.string(), message: z.string() })),
})

/** A workspace name: trimmed, white space collapsed, 1–80 characters. */
export const WorkspaceName = z
  .string({ error: "must be a string" })
  .max(1000, `must be at most ${WORKSPACE_NAME_MAX} characters`)
  .transform((raw, ctx) => {
    const name = cleanWorkspaceName(raw)
    if (name === undefined) ctx.addIssue({ code: "custom", message: "must not be empty" })
    else if (name.length < raw.trim().replace(/\s+/g, " ").length)
      ctx.addIssue({ code: "custom", message: `must be at most ${WORKSPACE_NAME_MAX} characters` })
    return name ?? z.NEVER
  })
