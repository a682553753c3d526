// What a client sends to make or change an experiment (POST/PATCH /api/workflows/{id}/experiments).
import { z } from "zod"
import { VOICES } from "../voices/voices.catalog.js"
import { mergeRuleBook, RuleBook } from "../workflows/rulebook.schema.js"

export const MIN_ARMS = 2
export const MAX_ARMS = 4
/** The largest seed: a target's arm is the hash of `${seed}:${target}`. */
export const MAX_SEED = 2_147_483_647

/** The rule-book fields an arm may change: every one but the schema's version. */
export const ARM_RULE_BOOK_FIELDS = Object.keys(RuleBook.shape).filter((k) => k !== "schema_version")

const PERSONA_IDS = VOICES.map((v) => v.id) as [string, ...string[]]

export const ArmInput = z
  .object({
    name: z
      .string()
      .trim()
      .min(1)
      .max(40)
      .regex(/^[\p{L}\p{N}][\p{L}\p{N} ._-]*$/u, "letters, digits, spaces, dots, dashes and underscores"),
    weight: z.number().positive().max(1000).default(1).describe("relative share of targets (default 1)"),
    persona: z.enum(PERSONA_IDS).optional().describe("a catalogue persona: the agent's name and voice"),
    voice: z.number().int().positive().optional().describe("one of the workspace's cloned voices"),
    rule_book: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("only the rule-book fields this arm changes (a policy's fields merge into the workflow's)"),
  })
  .strict()

export const ExperimentCreate = z
  .object({
    name: z.string().trim().min(1).max(100),
    arms: z.array(ArmInput).min(MIN_ARMS).max(MAX_ARMS).describe("the first arm is the control"),
    seed: z.number().int().min(0).max(MAX_SEED).optional().describe("default: drawn at random"),
  })
  .strict()
export type ExperimentCreate = z.infer<typeof ExperimentCreate>

export const ExperimentPatch = z
  .object({
    status: z.literal("ended").optional().describe("ends the experiment: calls go back to the workflow's book"),
    arms: z
      .array(z.object({ name: z.string().min(1).max(40), stopped: z.literal(true) }).strict())
      .min(1)
      .max(MAX_ARMS)
      .optional()
      .describe("arms to stop: they take no more calls, their targets are dealt among the open arms"),
    promote: z
      .string()
      .min(1)
      .max(40)
      .optional()
      .describe("the arm whose variant becomes the workflow's (a new rule book version); ends the experiment"),
  })
  .strict()
  .refine((p) => [p.status, p.arms, p.promote].filter((x) => x !== undefined).length === 1, {
    message: "give exactly one of status, arms or promote",
  })
export type ExperimentPatch = z.infer<typeof ExperimentPatch>

/** An arm's rule book: the workflow's with the arm's changes merged in (a policy's fields merge) and its persona. */
export function armRuleBook(
  base: RuleBook,
  arm: { readonly persona: string | null; readonly rule_book: Record<string, unknown> | null },
): unknown {
  const merged = mergeRuleBook(base, arm.rule_book ?? {}) as Record<string, unknown>
  return arm.persona === null ? merged : { ...merged, persona: arm.persona }
}
