// The shape and limits of a knowledge-base rule as callers send it: one set of zod schemas for
// POST and PUT /kb/rules and for every row of an import, so the three refuse the same things.
import { z } from "zod"

export const RULE_STATUSES = ["active", "paused", "archived"] as const
export const BUCKET_PATTERN = /^[a-z0-9_.-]{1,64}$/
export const CATEGORY_PATTERN = /^[a-z_]{1,60}$/
export const TITLE_MAX = 200
export const BODY_MAX = 2000
export const PHRASES_MAX = 20
export const PHRASE_MAX = 200
export const PRIORITY_MIN = -1000
export const PRIORITY_MAX = 1000
/** Separates trigger phrases in a CSV cell, so no phrase may contain it. */
export const PHRASE_SEPARATOR = " | "

const noNul = (s: string) => !s.includes("\0")

/** Text trimmed, at least one character, at most `max`; Postgres text cannot hold NUL. */
const text = (max: number) =>
  z
    .string({ error: (iss) => (iss.input === undefined ? "is required" : "must be a string") })
    .trim()
    .min(1, "is required")
    .max(max, `must be at most ${max} characters`)
    .refine(noNul, "must not contain NUL characters")

export const Bucket = z
  .string({ error: (iss) => (iss.input === undefined ? "is required" : "must be a string") })
  .regex(BUCKET_PATTERN, "must be 1–64 characters of a-z, 0-9, _ . -")

export const Phrase = text(PHRASE_MAX).refine((s) => !s.includes("|"), 'must not contain "|" (it separates phrases)')

/** `{phrases, category}`; no phrases and no category is the same as no trigger (null). */
export const Trigger = z
  .object(
    {
      phrases: z
        .array(Phrase, { error: "must be an array of strings" })
        .max(PHRASES_MAX, `at most ${PHRASES_MAX} phrases`)
        .default([]),
      category: z
        .string({ error: "must be a string" })
        .regex(CATEGORY_PATTERN, "must be 1–60 characters of a-z and _")
        .nullish(),
    },
    { error: "must be an object {phrases, category} or null" },
  )
  .nullish()
  .transform((t) =>
    t === null || t === undefined || (t.phrases.length === 0 && (t.category ?? null) === null)
      ? null
      : { phrases: t.phrases, category: t.category ?? null },
  )

export const Priority = z
  .number({ error: "must be an integer" })
  .int("must be an integer")
  .min(PRIORITY_MIN, `must be at least ${PRIORITY_MIN}`)
  .max(PRIORITY_MAX, `must be at most ${PRIORITY_MAX}`)

export const WorkflowRef = z
  .number({ error: "must be a workflow id or null" })
  .int("must be a workflow id")
  .positive("must be a workflow id")
  .max(Number.MAX_SAFE_INTEGER, "must be a workflow id")
  .nullable()

const status = <const S extends ReadonlyArray<string>>(values: S) =>
  z.enum(values as unknown as [S[number], ...S[number][]], { error: `must be one of ${values.join(", ")}` })

const fields = {
  bucket: Bucket,
  title: text(TITLE_MAX),
  body: text(BODY_MAX),
  trigger: Trigger,
  workflow_id: WorkflowRef.optional().transform((w) => w ?? null),
  priority: Priority.optional().transform((p) => p ?? 0),
}

/** POST /kb/rules: a new rule is active or paused (archiving is what DELETE does). */
export const CreateRule = z.object({
  ...fields,
  status: status(["active", "paused"] as const)
    .optional()
    .transform((s) => s ?? "active"),
})
export type CreateRuleInput = z.output<typeof CreateRule>

/** One rule of an import file (the export writes archived ones too, when asked for). */
export const ImportedRule = z.object({
  ...fields,
  status: status(RULE_STATUSES)
    .optional()
    .transform((s) => s ?? "active"),
})
export type ImportedRuleInput = z.output<typeof ImportedRule>

/** PUT /kb/rules/{id}: the fields given change; status archived archives, active/paused restores. */
export const UpdateRule = z
  .object({
    bucket: Bucket.optional(),
    title: text(TITLE_MAX).optional(),
    body: text(BODY_MAX).optional(),
    trigger: Trigger.optional(),
    workflow_id: WorkflowRef.optional(),
    priority: Priority.optional(),
    status: status(RULE_STATUSES).optional(),
  })
  .refine((p) => Object.values(p).some((v) => v !== undefined), "give at least one field to change")
export type UpdateRuleInput = z.output<typeof UpdateRule>
