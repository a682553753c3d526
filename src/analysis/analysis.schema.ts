// What a workflow asks of each connected call after hangup: the rule book's `analysis` section (zod,
// with its semantic checks), the strict JSON Schema a model answers in, and the zod check of that answer.
import { z } from "zod"

export const ANALYSIS_FIELD_TYPES = ["string", "number", "boolean", "enum", "date", "phone", "email"] as const
export type AnalysisFieldType = (typeof ANALYSIS_FIELD_TYPES)[number]

export const MAX_ANALYSIS_FIELDS = 20
export const SUMMARY_MAX_CHARS = 400
/** A string field's answer is clipped here: a CSV cell, not a transcript. */
export const FIELD_TEXT_MAX_CHARS = 500
export const SENTIMENTS = ["positive", "neutral", "negative"] as const
export type Sentiment = (typeof SENTIMENTS)[number]

/** Every call gets these; a workflow's own field may not take their names (the results table has one column each). */
export const BUILT_IN_FIELDS = ["summary", "goal_met", "sentiment", "callback_at", "agreed_value_minor"] as const

const SNAKE_CASE = /^[a-z][a-z0-9_]*$/

export const AnalysisField = z.object({
  name: z.string().min(1).max(40).regex(SNAKE_CASE, "must be snake_case (a-z, 0-9 and _, starting with a letter)"),
  type: z.enum(ANALYSIS_FIELD_TYPES),
  description: z.string().min(1).max(300),
  enum: z.array(z.string().min(1).max(60)).max(20).optional(),
})
export type AnalysisField = z.infer<typeof AnalysisField>

export const AnalysisSection = z.object({
  /** false: the workflow's calls are not analysed (no model call, no charge). */
  enabled: z.boolean().default(true),
  fields: z.array(AnalysisField).max(MAX_ANALYSIS_FIELDS).default([]),
})
export type AnalysisSection = z.infer<typeof AnalysisSection>

/** A rule book without an analysis section analyses its calls with the built-ins alone. */
export const DEFAULT_ANALYSIS: AnalysisSection = { enabled: true, fields: [] }

export interface AnalysisSectionError {
  readonly field: string
  readonly message: string
}

/** The checks zod cannot express: unique names, no built-in's name, enum values exactly for enums. */
export function analysisSectionErrors(section: AnalysisSection): AnalysisSectionError[] {
  const errors: AnalysisSectionError[] = []
  const seen = new Map<string, number>()
  section.fields.forEach((f, i) => {
    const at = `analysis.fields.${i}`
    const first = seen.get(f.name)
    if (first !== undefined)
      errors.push({ field: `${at}.name`, message: `duplicates the name of analysis.fields.${first}` })
    else seen.set(f.name, i)
    if ((BUILT_IN_FIELDS as readonly string[]).includes(f.name))
      errors.push({ field: `${at}.name`, message: `${f.name} is a built-in field every analysis has` })
    if (f.type === "enum") {
      if (f.enum === undefined || f.enum.length === 0)
        errors.push({ field: `${at}.enum`, message: "an enum field needs at least one value" })
      else if (new Set(f.enum).size !== f.enum.length)
        errors.push({ field: `${at}.enum`, message: "values must be unique" })
    } else if (f.enum !== undefined) errors.push({ field: `${at}.enum`, message: "only an enum field has values" })
  })
  return errors
}

// ---------------------------------------------------------------------------------------------
// The model's answer

/** One extracted field's value: the type its definition names, or null when the call did not say. */
export type FieldValue = string | number | boolean | null

export interface AnalysisAnswer {
  readonly summary: string
  readonly goal_met: boolean
  readonly sentiment: Sentiment
  readonly fields: Readonly<Record<string, FieldValue>>
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/
const E164 = /^\+[1-9]\d{6,14}$/

const isRealDate = (s: string): boolean => ISO_DATE.test(s) && new Date(`${s}T00:00:00Z`).toISOString().startsWith(s)

function fieldJsonSchema(f: AnalysisField): Record<string, unknown> {
  const description = f.description
  switch (f.type) {
    case "string":
      return { type: ["string", "null"], description }
    case "number":
      return { type: ["number", "null"], description }
    case "boolean":
      return { type: ["boolean", "null"], description }
    case "enum":
      return { type: ["string", "null"], enum: [...(f.enum ?? []), null], description }
    case "date":
      return { type: ["string", "null"], description: `${description} (a date as YYYY-MM-DD)` }
    case "phone":
      return { type: ["string", "null"], description: `${description} (E.164, e.g. +14155550100)` }
    case "email":
      return { type: ["string", "null"], description: `${description} (an email address)` }
  }
}

/**
 * The answer's JSON Schema, already in OpenAI's strict dialect (every property required, no others;
 * a field the call did not reveal is null). callback_at and agreed_value_minor are not asked: they
 * come from the approvals a human decided, never from the model's reading.
 */
export function analysisJsonSchema(fields: ReadonlyArray<AnalysisField>): Record<string, unknown> {
  return {
    type: "object",
    properties: {
      summary: {
        type: "string",
        description: `What happened on the call, in at most ${SUMMARY_MAX_CHARS} characters`,
      },
      goal_met: { type: "boolean", description: "Whether the call achieved the campaign's goal" },
      sentiment: { type: "string", enum: [...SENTIMENTS], description: "The callee's overall sentiment" },
      fields: {
        type: "object",
        properties: Object.fromEntries(fields.map((f) => [f.name, fieldJsonSchema(f)])),
        required: fields.map((f) => f.name),
        additionalProperties: false,
      },
    },
    required: ["summary", "goal_met", "sentiment", "fields"],
    additionalProperties: false,
  }
}

function fieldValueSchema(f: AnalysisField): z.ZodType<FieldValue> {
  switch (f.type) {
    case "string":
      return z
        .string()
        .transform((s) => s.slice(0, FIELD_TEXT_MAX_CHARS))
        .nullable()
    case "number":
      return z.number().finite().nullable()
    case "boolean":
      return z.boolean().nullable()
    case "enum":
      return z.enum((f.enum ?? []) as [string, ...string[]]).nullable()
    case "date":
      return z.string().refine(isRealDate, "must be a date as YYYY-MM-DD").nullable()
    case "phone":
      return z
        .string()
        .transform((s) => s.replace(/[\s().-]/g, ""))
        .pipe(z.string().regex(E164, "must be an E.164 number"))
        .nullable()
    case "email":
      return z.email().max(254).nullable()
  }
}

/**
 * The zod check of a model's answer against the workflow's fields. Strict output guarantees the
 * shape on a server that honours it; this is what holds when one does not. A summary past its limit
 * is clipped at a word (a limit strict mode cannot enforce), anything else wrong fails the attempt.
 */
export function analysisAnswerSchema(fields: ReadonlyArray<AnalysisField>): z.ZodType<AnalysisAnswer> {
  return z.object({
    summary: z.string().trim().min(1).transform(clipSummary),
    goal_met: z.boolean(),
    sentiment: z.enum(SENTIMENTS),
    fields: z.strictObject(Object.fromEntries(fields.map((f) => [f.name, fieldValueSchema(f)]))),
  }) as unknown as z.ZodType<AnalysisAnswer>
}

/** `text` within SUMMARY_MAX_CHARS, cut at the last word that fits, with an ellipsis when cut. */
export function clipSummary(text: string): string {
  const t = text.replace(/\s+/g, " ").trim()
  if (t.length <= SUMMARY_MAX_CHARS) return t
  const head = t.slice(0, SUMMARY_MAX_CHARS - 1)
  const cut = head.lastIndexOf(" ")
  return `${(cut > SUMMARY_MAX_CHARS / 2 ? head.slice(0, cut) : head).trimEnd()}…`
}
