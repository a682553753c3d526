// What the data-source agent can do over a source's stored rows: count, filter, top values, valid
// phones, and an audience made from a filter. The simulator and the model's tool calls both run these.
import { Effect } from "effect"
import type { JsonAudienceRow } from "../audience/audience.parse.js"
import { type AttachResult, attachAudience } from "../audience/audience.service.js"
import { type TenantCountry, toE164 } from "../phones/phone.js"
import type { DomainError } from "../platform/errors.js"
import { parseJson, tooDeepMessage } from "../platform/json.js"
import type { ToolCall, ToolSpec } from "../providers/llm/llm.interface.js"

export type Row = Readonly<Record<string, unknown>>

/** At most this many rows go back to the model in one tool result. */
export const TOOL_ROWS_MAX = 50
/** A tool result is cut to this many characters of JSON (fewer rows) before the model sees it. */
export const TOOL_RESULT_CHARS = 16_000
/** top_values answers at most this many values. */
export const TOP_MAX = 50

/** A cell as text: what "equals" and the top values compare. */
export const cell = (v: unknown): string =>
  v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v)

const norm = (s: string): string => s.trim().toLowerCase()

/** A column named loosely (any case, quotes, spaces for underscores) → the source's own name. */
export function resolveColumn(columns: ReadonlyArray<string>, name: string): string | undefined {
  const bare = name.trim().replace(/^["'`]+|["'`]+$/g, "")
  const key = (s: string) => norm(s).replace(/[\s_-]+/g, "_")
  return columns.find((c) => c === bare) ?? columns.find((c) => key(c) === key(bare))
}

const firstColumn = (columns: ReadonlyArray<string>, pattern: RegExp): string | undefined =>
  columns.find((c) => pattern.test(c))

/** The column holding phone numbers, by name (phone, mobile, msisdn, tel…). */
export const phoneColumn = (columns: ReadonlyArray<string>): string | undefined =>
  firstColumn(columns, /phone|mobile|msisdn|^tel|cell/i)

/** The column holding a person's name, by name. */
export const nameColumn = (columns: ReadonlyArray<string>): string | undefined =>
  firstColumn(columns, /^name$|full_?name|customer_?name/i) ?? firstColumn(columns, /name/i)

/** Rows whose `column` equals `equals`, compared as trimmed text, case-insensitively. */
export function matching(rows: ReadonlyArray<Row>, column: string, equals: string): Row[] {
  const want = norm(equals)
  return rows.filter((r) => norm(cell(r[column])) === want)
}

/** The `n` most frequent non-empty values of `column`, most frequent first (ties by value). */
export function topValues(
  rows: ReadonlyArray<Row>,
  column: string,
  n: number,
): Array<{ value: string; count: number }> {
  const counts = new Map<string, number>()
  for (const r of rows) {
    const v = cell(r[column]).trim()
    if (v !== "") counts.set(v, (counts.get(v) ?? 0) + 1)
  }
  return [...counts]
    .map(([value, count]) => ({ value, count }))
    .sort((a, b) => b.count - a.count || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0))
    .slice(0, Math.max(1, Math.min(TOP_MAX, n)))
}

/** How many rows have a phone valid in the workspace's country (libphonenumber), and how many not. */
export function validPhones(rows: ReadonlyArray<Row>, column: string, country: TenantCountry) {
  let valid = 0
  for (const r of rows) {
    const v = r[column]
    if ((typeof v === "string" || typeof v === "number") && toE164(v, country).ok) valid++
  }
  return { valid, invalid: rows.length - valid }
}

// ---------------------------------------------------------------------------------------------
// An audience from a filter

export interface AudienceAsk {
  readonly workflow_id: number
  readonly where: { readonly column: string; readonly equals: string }
  readonly phone_column: string
  readonly name_column?: string | undefined
}

export type AudienceCounts = Omit<AttachResult, "invalid_rows"> & { readonly matched: number }

/**
 * Attaches the matching rows to the workflow's audience through the normal attach (DNC,
 * registry, cool-down, E.164); fails NotFound for a workflow that is not the workspace's.
 */
export const createAudience = (
  who: { tenantId: number; userId: number | null },
  rows: ReadonlyArray<Row>,
  ask: AudienceAsk,
) =>
  Effect.gen(function* () {
    const picked = matching(rows, ask.where.column, ask.where.equals)
    const audience: JsonAudienceRow[] = picked.map((r) => {
      const { [ask.phone_column]: phone, ...rest }: Record<string, unknown> = r
      const name = ask.name_column === undefined ? undefined : r[ask.name_column]
      if (ask.name_column !== undefined) delete rest[ask.name_column]
      return {
        ...rest,
        phone: typeof phone === "number" ? phone : cell(phone),
        name: name === undefined || name === null ? null : cell(name),
      }
    })
    const result = yield* attachAudience(who, ask.workflow_id, { kind: "json", rows: audience }, (work) =>
      Effect.promise(work),
    )
    const { invalid_rows: _, ...counts } = result
    return { ...counts, matched: picked.length } satisfies AudienceCounts
  })

// ---------------------------------------------------------------------------------------------
// The model's tools

const str = { type: "string" } as const
const where = {
  type: "object",
  properties: { column: str, equals: str },
  required: ["column", "equals"],
  additionalProperties: false,
} as const

export const TOOLS: ReadonlyArray<ToolSpec> = [
  {
    name: "count_rows",
    description: "The number of rows in the source.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
  },
  {
    name: "filter_rows",
    description: `Rows whose column equals a value (trimmed, any case): their count and up to ${TOOL_ROWS_MAX} rows.`,
    parameters: where,
  },
  {
    name: "top_values",
    description: `The n (1-${TOP_MAX}) most frequent non-empty values of a column, with their counts.`,
    parameters: {
      type: "object",
      properties: { column: str, n: { type: "integer", minimum: 1, maximum: TOP_MAX } },
      required: ["column", "n"],
      additionalProperties: false,
    },
  },
  {
    name: "create_audience",
    description:
      "Attach the rows matching `where` to a workflow's audience (DNC, registry, cool-down and phone checks " +
      "apply); answers the counts accepted and rejected.",
    parameters: {
      type: "object",
      properties: { workflow_id: { type: "integer" }, where, phone_column: str, name_column: str },
      required: ["workflow_id", "where", "phone_column"],
      additionalProperties: false,
    },
  },
]

export interface ToolContext {
  readonly who: { tenantId: number; userId: number | null }
  readonly columns: ReadonlyArray<string>
  readonly rows: ReadonlyArray<Row>
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

const errorText = (e: DomainError): string => {
  const m = (e as { message?: unknown }).message
  return typeof m === "string" && m !== "" ? m : e._tag
}

/** Rows for the model: at most TOOL_ROWS_MAX, fewer when their JSON would pass TOOL_RESULT_CHARS. */
function boundedRows(rows: ReadonlyArray<Row>): Row[] {
  const out = rows.slice(0, TOOL_ROWS_MAX)
  while (out.length > 0 && JSON.stringify(out).length > TOOL_RESULT_CHARS) out.pop()
  return out
}

/**
 * Runs one tool call over the stored rows. Never fails: a bad call (unknown tool, bad arguments,
 * unknown column, another workspace's workflow) is an `{error}` result the model reads.
 */
export const runTool = (call: ToolCall, ctx: ToolContext) =>
  Effect.gen(function* () {
    // Bounded in depth: the arguments are echoed back with JSON.stringify, which recursion overflows.
    const parsed = call.arguments.trim() === "" ? { ok: true as const, value: {} } : parseJson(call.arguments)
    if (!parsed.ok)
      return { error: parsed.reason === "syntax" ? "the arguments are not JSON" : `the arguments ${tooDeepMessage()}` }
    const args = parsed.value
    if (!isObject(args)) return { error: "the arguments must be a JSON object" }
    const column = (v: unknown): string | undefined =>
      typeof v === "string" ? resolveColumn(ctx.columns, v) : undefined
    const unknownColumn = (v: unknown) => ({
      error: `unknown column ${JSON.stringify(v)}; the columns are ${ctx.columns.join(", ")}`,
    })
    switch (call.name) {
      case "count_rows":
        return { count: ctx.rows.length }
      case "filter_rows": {
        const c = column(args.column)
        if (c === undefined) return unknownColumn(args.column)
        const equals = cell(args.equals)
        const hits = matching(ctx.rows, c, equals)
        const rows = boundedRows(hits)
        return { column: c, equals, count: hits.length, rows, truncated: rows.length < hits.length }
      }
      case "top_values": {
        const c = column(args.column)
        if (c === undefined) return unknownColumn(args.column)
        const n = typeof args.n === "number" && Number.isInteger(args.n) ? args.n : 5
        return { column: c, values: topValues(ctx.rows, c, n) }
      }
      case "create_audience": {
        const w = isObject(args.where) ? args.where : {}
        const whereColumn = column(w.column)
        if (whereColumn === undefined) return unknownColumn(w.column)
        const phone = column(args.phone_column)
        if (phone === undefined) return unknownColumn(args.phone_column)
        const name = args.name_column === undefined || args.name_column === null ? undefined : column(args.name_column)
        if (args.name_column !== undefined && args.name_column !== null && name === undefined)
          return unknownColumn(args.name_column)
        const workflowId = args.workflow_id
        if (typeof workflowId !== "number" || !Number.isSafeInteger(workflowId) || workflowId < 1)
          return { error: "workflow_id must be a positive integer" }
        const ask = {
          workflow_id: workflowId,
          where: { column: whereColumn, equals: cell(w.equals) },
          phone_column: phone,
          name_column: name,
        }
        return yield* createAudience(ctx.who, ctx.rows, ask).pipe(
          Effect.map((counts) => ({ workflow_id: workflowId, ...counts }) as Record<string, unknown>),
          Effect.catchAll((e: DomainError) => Effect.succeed({ error: errorText(e), code: e._tag })),
        )
      }
      default:
        return { error: `unknown tool ${call.name}; the tools are ${TOOLS.map((t) => t.name).join(", ")}` }
    }
  })
