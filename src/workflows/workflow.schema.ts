// The shapes of a workflow's own settings: statuses, schedule kinds and the schedule (calling
// window in the callee's local time), and what a PUT may change. Rule-book shapes live in
// rulebook.schema.ts.
import { z } from "zod"
import { VOICES } from "../voices/voices.catalog.js"

export const WORKFLOW_STATUSES = ["draft", "live", "paused", "retired"] as const
export type WorkflowStatus = (typeof WORKFLOW_STATUSES)[number]

/**
 * immediate: a started run dials at once, inside the calling window; window: only on the
 * schedule's days inside the window; once: not before `start_at`, then like immediate.
 */
export const SCHEDULE_KINDS = ["immediate", "window", "once"] as const
export type ScheduleKind = (typeof SCHEDULE_KINDS)[number]

export const PERSONA_IDS = VOICES.map((v) => v.id) as [string, ...string[]]
export const Persona = z.enum(PERSONA_IDS, { error: `must be one of ${PERSONA_IDS.join(", ")}` })

const WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] as const

const clock = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, "must be a 24-hour time HH:MM")

const isTimeZone = (tz: string): boolean => {
  try {
    new Intl.DateTimeFormat("en", { timeZone: tz })
    return true
  } catch {
    return false
  }
}

/** The callee's local calling window; the dialer holds targets outside it. */
export const CallingHours = z
  .object({ start: clock, end: clock })
  .refine((h) => h.start < h.end, { message: "start must be before end", path: ["end"] })

export const Schedule = z
  .object({
    calling_hours: CallingHours.optional(),
    /** Used when a callee's number gives no time zone of its own. */
    timezone: z.string().max(64).refine(isTimeZone, "must be an IANA time zone such as Asia/Kolkata").optional(),
    days: z.array(z.enum(WEEKDAYS)).min(1).max(7).optional(),
    start_at: z.iso.datetime({ offset: true, error: "must be an ISO 8601 timestamp" }).optional(),
  })
  .strict()
export type Schedule = z.infer<typeof Schedule>

export const DEFAULT_CALLING_HOURS = { start: "09:00", end: "21:00" } as const

/** The schedule as stored, with the defaults a reader should see filled in. */
export const effectiveSchedule = (s: Schedule): Schedule & { calling_hours: { start: string; end: string } } => ({
  ...s,
  calling_hours: s.calling_hours ?? DEFAULT_CALLING_HOURS,
})

/** Rule-book keys a PUT may send at the top level as well as inside `rule_book`. */
export const RULE_BOOK_FIELDS = [
  "goal",
  "language",
  "system_prompt",
  "opening_line",
  "disclosure_lines",
  "objection_handlers",
  "concession_policy",
  "callback_policy",
  "escalation_policy",
  "voicemail",
  "max_call_seconds",
  "ncpr_category",
] as const

export const WorkflowUpdate = z
  .object({
    name: z.string().trim().min(1, "must not be empty").max(200).optional(),
    persona: Persona.optional(),
    schedule_kind: z.enum(SCHEDULE_KINDS).optional(),
    schedule: Schedule.optional(),
    /** Rule-book fields to change; the three *_policy objects merge one level deep. */
    rule_book: z.record(z.string(), z.unknown()).optional(),
    goal: z.unknown().optional(),
    language: z.unknown().optional(),
    system_prompt: z.unknown().optional(),
    opening_line: z.unknown().optional(),
    disclosure_lines: z.unknown().optional(),
    objection_handlers: z.unknown().optional(),
    concession_policy: z.unknown().optional(),
    callback_policy: z.unknown().optional(),
    escalation_policy: z.unknown().optional(),
    voicemail: z.unknown().optional(),
    max_call_seconds: z.unknown().optional(),
    ncpr_category: z.unknown().optional(),
  })
  .strict()
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "send at least one field to change" })
export type WorkflowUpdate = z.infer<typeof WorkflowUpdate>
