// The simulator's data-source agent: a documented set of questions (regular expressions, any case)
// answered deterministically by computing over the rows; anything else gets the list of questions.
import type { TenantCountry } from "../phones/phone.js"
import {
  type AudienceAsk,
  cell,
  matching,
  nameColumn,
  phoneColumn,
  type Row,
  resolveColumn,
  TOP_MAX,
  topValues,
  validPhones,
} from "./chat.tools.js"

/** How many matching rows a "rows where" answer shows. */
export const SIM_EXAMPLES = 5
/** "top values of x" without a number. */
export const SIM_TOP_DEFAULT = 5

export type SimAnswer =
  | { readonly kind: "reply"; readonly text: string; readonly data: Record<string, unknown> }
  | { readonly kind: "audience"; readonly ask: AudienceAsk }

/** The questions the simulator answers, as the help reply lists them. */
export const SIM_QUESTIONS = [
  "how many rows?",
  "how many have a valid phone?",
  "top 5 values of <column>",
  "rows where <column> is <value>",
  "make an audience for workflow <id> from rows where <column> is <value>",
] as const

const HOW_MANY_ROWS = /\bhow many rows\b/i
const VALID_PHONE = /\bhow many\b.*\b(?:have|with)\b.*\bvalid phone/i
const TOP = /\btop\s+(?:(\d{1,3})\s+)?values?\s+(?:of|for|in)\s+(.+?)[\s?.!]*$/i
const AUDIENCE =
  /\bmake an audience for workflow\s+#?(\d{1,15})\s+from rows where\s+(.+?)\s+(?:is|=|equals)\s+(.+?)[\s?.!]*$/i
const WHERE = /\brows where\s+(.+?)\s+(?:is|=|equals)\s+(.+?)[\s?.!]*$/i

const unquote = (s: string): string => s.trim().replace(/^["'`]+|["'`]+$/g, "")

export interface SimContext {
  readonly columns: ReadonlyArray<string>
  readonly rows: ReadonlyArray<Row>
  readonly country: TenantCountry
}

const reply = (text: string, data: Record<string, unknown>): SimAnswer => ({ kind: "reply", text, data })

const noColumn = (name: string, columns: ReadonlyArray<string>): SimAnswer =>
  reply(`There is no column "${name}". The columns are: ${columns.length === 0 ? "(none)" : columns.join(", ")}.`, {
    question: "unknown_column",
    column: name,
    columns: [...columns],
  })

export function simAnswer(message: string, ctx: SimContext): SimAnswer {
  const text = message.trim()
  const rows = ctx.rows
  const audience = AUDIENCE.exec(text)
  if (audience !== null) {
    const column = resolveColumn(ctx.columns, audience[2]!)
    if (column === undefined) return noColumn(unquote(audience[2]!), ctx.columns)
    const phone = phoneColumn(ctx.columns)
    if (phone === undefined)
      return reply("No column looks like a phone number (phone, mobile, …), so I cannot make an audience.", {
        question: "create_audience",
        columns: [...ctx.columns],
      })
    return {
      kind: "audience",
      ask: {
        workflow_id: Number(audience[1]),
        where: { column, equals: unquote(audience[3]!) },
        phone_column: phone,
        name_column: nameColumn(ctx.columns),
      },
    }
  }
  if (VALID_PHONE.test(text)) {
    const phone = phoneColumn(ctx.columns)
    if (phone === undefined)
      return reply("No column looks like a phone number (phone, mobile, …).", {
        question: "valid_phones",
        columns: [...ctx.columns],
      })
    const { valid, invalid } = validPhones(rows, phone, ctx.country)
    return reply(`${valid} of ${rows.length} rows have a valid phone in ${phone} (${invalid} do not).`, {
      question: "valid_phones",
      column: phone,
      country: ctx.country,
      valid,
      invalid,
      total: rows.length,
    })
  }
  if (HOW_MANY_ROWS.test(text) && !WHERE.test(text))
    return reply(`The source has ${rows.length} rows.`, { question: "count_rows", count: rows.length })
  const top = TOP.exec(text)
  if (top !== null) {
    const column = resolveColumn(ctx.columns, top[2]!)
    if (column === undefined) return noColumn(unquote(top[2]!), ctx.columns)
    const n = Math.max(1, Math.min(TOP_MAX, top[1] === undefined ? SIM_TOP_DEFAULT : Number(top[1])))
    const values = topValues(rows, column, n)
    const list = values.map((v) => `${v.value} (${v.count})`).join(", ")
    return reply(values.length === 0 ? `${column} is empty in every row.` : `Top values of ${column}: ${list}.`, {
      question: "top_values",
      column,
      n,
      values,
    })
  }
  const where = WHERE.exec(text)
  if (where !== null) {
    const column = resolveColumn(ctx.columns, where[1]!)
    if (column === undefined) return noColumn(unquote(where[1]!), ctx.columns)
    const equals = unquote(where[2]!)
    const hits = matching(rows, column, equals)
    const examples = hits.slice(0, SIM_EXAMPLES)
    const shown = examples.map((r) =>
      Object.entries(r)
        .map(([k, v]) => `${k}: ${cell(v)}`)
        .join(", "),
    )
    return reply(
      `${hits.length} of ${rows.length} rows have ${column} = ${equals}.` +
        (shown.length === 0 ? "" : ` For example:\n${shown.map((s) => `- ${s}`).join("\n")}`),
      { question: "filter_rows", column, equals, count: hits.length, total: rows.length, examples },
    )
  }
  const list = SIM_QUESTIONS.map((q) => `- ${q}`).join("\n")
  return reply(`I can answer these questions about this source's ${rows.length} rows:\n${list}`, {
    question: "help",
    questions: [...SIM_QUESTIONS],
  })
}

/** The simulator's words for an audience made from a filter. */
export function audienceText(
  ask: AudienceAsk,
  c: { matched: number; accepted: number } & Record<string, number>,
): string {
  return (
    `Made an audience for workflow ${ask.workflow_id} from the ${c.matched} rows where ${ask.where.column} = ` +
    `${ask.where.equals}: ${c.accepted} accepted; rejected ${c.rejected_dnc} on the do-not-call list, ` +
    `${c.rejected_ncpr} on the national registry, ${c.rejected_cooldown} in cool-down, ${c.rejected_invalid} ` +
    `invalid numbers; ${c.duplicates} duplicates. The workflow now has ${c.total_targets} targets.`
  )
}
