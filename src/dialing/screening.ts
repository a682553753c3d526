// Whether a due target may be dialed now: the compliance checks in their order (DNC, erasure,
// NCPR, cool-down, calling window), each refusal as the decision to write. Pure: time comes in.
import { COOLDOWN_MS } from "../compliance/dnc.service.js"
import { ncprBlocks } from "../compliance/ncpr.import.js"
import type { DueTarget } from "../runs/run-targets.repo.js"
import type { Schedule, ScheduleKind } from "../workflows/workflow.schema.js"
import { callingWindowCheck, Decision, type DialDecision } from "./dialer.policy.js"

export interface ScreeningInput {
  readonly target: Pick<
    DueTarget,
    "target_id" | "phone_e164" | "on_dnc" | "ncpr_preference" | "attempts" | "last_contacted_at"
  >
  /** Epoch ms. */
  readonly now: number
  /** The batch's numbers erased from the workspace (POST /dsr/erase). */
  readonly erased: ReadonlySet<string>
  /** The rule book's NCPR category. */
  readonly ncprCategory: number | null
  readonly schedule: Schedule
  readonly scheduleKind: ScheduleKind
  /** CALLING_HOURS=any. */
  readonly callingHoursAny: boolean
}

/**
 * The callee's time zones when it may be dialed now; else the decision, written as a skip, or as
 * a hold until `holdUntil` (epoch ms) when the calling window opens later.
 */
export type Screening =
  | { readonly dial: true; readonly zones: ReadonlyArray<string> }
  | { readonly dial: false; readonly decision: DialDecision; readonly holdUntil: number | null }

const skip = (decision: DialDecision): Screening => ({ dial: false, decision, holdUntil: null })

export function screenTarget(input: ScreeningInput): Screening {
  const { target: t, now } = input
  if (t.on_dnc) return skip(Decision.skip(t.target_id, now, "dnc_listed"))
  if (t.phone_e164.startsWith("erased:") || input.erased.has(t.phone_e164))
    return skip(Decision.skip(t.target_id, now, "contact_erased"))
  if (t.ncpr_preference !== null && t.phone_e164.startsWith("+91") && ncprBlocks(t.ncpr_preference, input.ncprCategory))
    return skip(Decision.skip(t.target_id, now, "ncpr_registered", { preference: t.ncpr_preference }))
  // The cool-down protects people from other campaigns; this run's own retries are its business.
  if (t.attempts === 0 && t.last_contacted_at !== null && now - t.last_contacted_at.getTime() < COOLDOWN_MS) {
    const detail = { last_contacted_at: t.last_contacted_at.toISOString() }
    return skip(Decision.skip(t.target_id, now, "cooldown", detail))
  }
  const window = callingWindowCheck({
    phoneE164: t.phone_e164,
    schedule: input.schedule,
    scheduleKind: input.scheduleKind,
    now,
    any: input.callingHoursAny,
  })
  if (!window.ok)
    return { dial: false, decision: Decision.fromWindow(t.target_id, now, window), holdUntil: window.nextOpenAt }
  return { dial: true, zones: window.zones }
}
