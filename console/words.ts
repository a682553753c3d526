// The console's one mapping from the API's machine words (error codes, statuses, outcomes, reasons,
// policy values) to the short human words a page shows; every page asks here rather than printing a code.

/** snake_case or dotted.words as a phrase: "no_answer" → "No answer" (for a value no table knows yet). */
export function humanize(token: string): string {
  const spaced = token.replace(/[._]+/g, " ").trim()
  return spaced === "" ? "—" : spaced.charAt(0).toUpperCase() + spaced.slice(1)
}

/** A name written with underscores (a field, a category) as words: "plan_chosen" → "plan chosen". */
export const spaced = (name: string): string => name.replace(/_/g, " ")

/** A server's phrase as a sentence: capitalised, ending in a full stop. */
export function sentence(text: string): string {
  const t = text.trim()
  if (t === "") return t
  const s = t.charAt(0).toUpperCase() + t.slice(1)
  return /[.!?…]$/.test(s) ? s : `${s}.`
}

const lookup =
  (table: Readonly<Record<string, string>>) =>
  (value: string | null | undefined, none = "—"): string =>
    value === null || value === undefined || value === "" ? none : (table[value] ?? humanize(value))

/** A call's or a target's final outcome. */
export const outcomeWords = lookup({
  agreed: "Agreed",
  agreed_with_concession: "Agreed with a discount",
  declined: "Declined",
  callback_scheduled: "Wants a call back",
  escalated: "Passed to a person",
  pending_approval: "Waiting for a decision",
  do_not_call: "Asked not to be called",
  no_decision: "No decision",
  interested: "Interested",
  callee_hung_up: "Hung up",
  agent_error: "The agent had a fault",
  aborted: "Stopped",
  voicemail: "Reached voicemail",
  voicemail_left: "Left a voicemail",
  no_answer: "No answer",
  busy: "Busy",
  failed: "Call failed",
  insufficient_funds: "Not placed: the wallet ran out",
  interrupted: "Cut off",
  max_duration: "Reached the time limit",
  handed_off: "Handed to a person",
  handoff_failed: "Hand-off to a person failed",
  not_placed: "Not placed",
  agreed_after_call: "Discount approved after the call",
  denied_after_call: "Refused after the call",
  escalated_after_call: "Passed to a person after the call",
  dnc_listed: "Skipped: on the do-not-call list",
  ncpr_registered: "Skipped: on the national do-not-call registry",
  contact_erased: "Skipped: the person's data was erased",
  cooldown: "Skipped: called too recently",
  cancelled: "Cancelled",
})

/** A run's status. */
export const runStatusWords = lookup({
  running: "Running",
  paused: "Paused",
  completed: "Finished",
  cancelled: "Stopped",
  failed: "Failed",
})

/** A target's place in a run. */
export const targetStatusWords = lookup({
  queued: "Not called yet",
  waiting: "Waiting to try again",
  dialing: "Being called",
  done: "Done",
  skipped: "Skipped",
})

/** A call's state. */
export const callStatusWords = lookup({
  dialing: "Ringing",
  connected: "On the call",
  ended: "Ended",
})

/** A workflow's (campaign's) status. */
export const workflowStatusWords = lookup({ draft: "Draft", live: "Live", paused: "Paused", retired: "Retired" })

/** An approval's state. */
export const approvalStatusWords = lookup({
  pending: "Waiting for a decision",
  approved: "Approved",
  denied: "Denied",
  expired: "Expired",
})

/** Where a pending approval's call stands (GET /api/approvals `phase`, and `decided_phase`). */
export const phaseWords = lookup({
  on_hold: "On hold — waiting for you",
  after_call: "After the call",
})

/** Where the call stood when an approval was decided (GET /api/approvals `decided_phase`). */
export const decidedPhaseWords = lookup({
  on_hold: "while the callee held",
  after_call: "after the call had ended",
})

/** What a decision made after the call will do, said before the click (the API's `effect` says it after). */
export function afterCallWords(
  action: string,
  amount: string | null,
): { readonly explain: string; readonly approve: string; readonly deny: string } {
  switch (action) {
    case "callback":
      return {
        explain:
          "The call has ended. Approving schedules a callback (a new call); denying records the callback as " +
          "denied and no one is called.",
        approve: "Approve: schedule a callback",
        deny: "Deny: no callback",
      }
    case "escalate":
      return {
        explain:
          "The call has ended. Approving records the transfer as approved, for a colleague to follow up; denying " +
          "records it as denied. No one is called.",
        approve: "Approve: leave it for a colleague",
        deny: "Deny: record as denied",
      }
    default:
      return {
        explain:
          `The call has ended. Approving records the agreed ${amount ?? "discount"} on the result; denying records ` +
          "the discount as denied. No one is called.",
        approve: `Approve: record ${amount ?? "it"} as agreed`,
        deny: "Deny: record as denied",
      }
  }
}

/** Who decided an approval (GET /api/approvals decided_by_kind, _name, _email). */
export function decidedByWords(kind: string | null, name: string | null, email: string | null): string {
  if (kind === "user") return name && email && name !== email ? `${name} (${email})` : (name ?? email ?? "A member")
  if (kind === "api_key") return `API key “${name ?? "unnamed"}”`
  if (kind === "system") return "Cancelled when the person's data was erased"
  return "No one: it ran out of time"
}

/** What an approval asks for. */
export const proposedActionWords = lookup({
  concession: "Concession",
  callback: "Callback",
  escalate: "Escalation to a person",
})

/** The rule book's voicemail policy. */
export const voicemailWords = lookup({
  hang_up: "Hang up without leaving a message",
  leave_opening_line: "Leave the opening line as a message",
})

/** How a campaign is scheduled. */
export const scheduleKindWords = lookup({
  immediate: "As soon as it runs",
  window: "Only on the chosen days",
  once: "Not before its start time",
})

/** Why an audience row was not taken (invalid_rows[].reason). */
export const invalidPhoneWords = lookup({
  missing: "no phone number",
  not_a_number: "not a phone number",
  invalid_country: "the country is not recognised",
  too_short: "too few digits",
  too_long: "too many digits",
  invalid_length: "the wrong number of digits",
  invalid_number: "not a valid number",
})

/** What a workflow still needs before it can run (readiness.missing, WORKFLOW_NOT_READY's missing). */
export const missingWords = lookup({
  rule_book: "a rule book",
  audience: "an audience (upload a list of numbers)",
  compliance: "a consent attestation",
  email_verified: "the owner's verified email address (open the link in the verification email)",
})

/** What besides readiness keeps Run off (readiness.blocked_by). */
export const blockedWords = lookup({
  retired: "The campaign is retired.",
  run_in_progress: "A run is in progress.",
})

/** The post-call analysis's state. */
export const analysisStatusWords = lookup({ pending: "Being analysed…", done: "Analysed", failed: "Analysis failed" })

export const sentimentWords = lookup({ positive: "Positive", neutral: "Neutral", negative: "Negative" })

/** An API key's state. */
export const keyStatusWords = lookup({ active: "Active", revoked: "Revoked", expired: "Expired" })

/** How a number came onto the do-not-call list. */
export const dncSourceWords = lookup({
  manual: "Added here",
  import: "Imported",
  call: "Asked on a call",
  unsubscribe: "Unsubscribed",
  erasure: "Data erased",
})

/** A wallet ledger entry's kind. */
export const ledgerKindWords = lookup({
  topup: "Top-up",
  trial_credit: "Trial credit",
  call_reservation: "Call (held while it runs)",
  call_release: "Call (unused hold returned)",
  call_charge: "Call",
  call_analysis: "Call analysis",
  number_rental: "Phone number rental",
  platform_fee: "Platform fee",
  mandate_payment: "Subscription payment",
  refund: "Refund",
})

/** A provider credential's state (GET /onboarding/status). */
export const credentialStatusWords = lookup({
  validated: "Checked and working",
  failed: "Refused by the provider",
  unvalidated: "Saved, not checked yet",
  not_configured: "Not set up",
})

/** A provider kind (GET /onboarding/status providers[].kind). */
export const providerKindWords = lookup({
  language_model: "Language model",
  telephony: "Telephony",
  speech_synthesis: "Speech synthesis",
  speech_recognition: "Speech recognition",
})

/** One webhook delivery attempt's outcome, and a delivery's state. */
export const deliveryWords = lookup({
  delivered: "Delivered",
  retry: "Failed, will retry",
  failed: "Failed",
  pending: "Waiting to be sent",
})

/** The events a webhook endpoint can subscribe to, as a sentence each. */
export const EVENT_WORDS: Readonly<Record<string, string>> = {
  "call.completed": "A call ended",
  "call.failed": "A call could not be placed",
  "call.analyzed": "A call's analysis is ready",
  "workflow.run.started": "A campaign run started",
  "workflow.run.ended": "A campaign run ended",
  "approval.requested": "An approval was asked for",
  "approval.resolved": "An approval was decided",
  "message.sent": "A message was sent",
  "message.delivered": "A message was delivered",
  "message.replied": "A message was answered",
  "wallet.low": "The wallet is running low",
  "wallet.exhausted": "The wallet is empty",
  "tenant.suspended": "The workspace was suspended",
  ping: "A test ping",
}
export const eventWords = lookup(EVENT_WORDS)

/** A list in a sentence: "a, b and c". */
export function listWords(items: ReadonlyArray<string>): string {
  if (items.length <= 1) return items.join("")
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`
}

/** A wait in words: 75 → "in about 2 minutes". */
export function inAbout(seconds: number): string {
  if (seconds < 60) return `in ${Math.max(1, Math.ceil(seconds))} seconds`
  const minutes = Math.ceil(seconds / 60)
  if (minutes < 90) return `in about ${minutes} minute${minutes === 1 ? "" : "s"}`
  return `in about ${Math.round(minutes / 60)} hours`
}

/** Field names as a person reads them, for a refusal that names fields. */
const FIELD_WORDS: Readonly<Record<string, string>> = {
  email: "Email",
  password: "Password",
  full_name: "Name",
  workspace_name: "Workspace name",
  name: "Name",
  nl_prompt: "Prompt",
  url: "URL",
  events: "Events",
  description: "Description",
  consent_attestation_text: "Consent statement",
  phone_e164: "Phone number",
  opening_line: "Opening line",
  text: "Text",
  amount_minor: "Amount",
  value_minor: "Amount",
  note: "Note",
  code: "Code",
  operator_number: "Operator number",
}

/** "rule_book.objection_handlers.0.response" → "Objection handlers 1 response". */
export function fieldWords(field: string): string {
  const known = FIELD_WORDS[field]
  if (known !== undefined) return known
  const parts = field
    .split(".")
    .filter((p) => p !== "rule_book" && p !== "schedule")
    .map((p) => (/^\d+$/.test(p) ? String(Number(p) + 1) : (FIELD_WORDS[p] ?? p.replace(/_/g, " "))))
  return humanize(parts.join(" "))
}

/** What an API error body says, in words: the sentence for its code, else the server's own, tidied. */
export interface ErrorBody {
  readonly code: string
  readonly status: number
  readonly message: string
  readonly body: Readonly<Record<string, unknown>>
  readonly errors: ReadonlyArray<{ readonly field: string; readonly message: string }>
  readonly retryAfterSeconds: number | undefined
}

const FIXED: Readonly<Record<string, string>> = {
  NETWORK: "The server could not be reached. Check your connection and try again.",
  INTERNAL: "Something went wrong on the server. Try again; if it persists, contact support.",
  INTERNAL_ERROR: "Something went wrong on the server. Try again; if it persists, contact support.",
  DATABASE_TIMEOUT: "The server is busy just now. Try again in a moment.",
  DATABASE_UNAVAILABLE: "The server is busy just now. Try again in a moment.",
  SHUTTING_DOWN: "The server is restarting. Try again in a moment.",
  GATEWAY_UNAVAILABLE: "A provider we rely on did not answer. Try again in a moment.",
  INSUFFICIENT_ROLE:
    "Your role in this workspace does not allow this. An owner or admin can do it, or change your role.",
  INSUFFICIENT_SCOPE: "This key's scope does not allow this.",
  FORBIDDEN: "You may not do this.",
  CSRF_REJECTED: "The request was refused because it did not come from this page. Reload the page and try again.",
  ACCOUNT_INACTIVE: "Your account is no longer part of this workspace.",
  UNAUTHENTICATED: "Your session has ended. Sign in again.",
  EMAIL_TAKEN: "An account with this email already exists. Sign in instead, or use another address.",
  CHALLENGE_REQUIRED: "Please confirm you are a person, then try again.",
  CHALLENGE_FAILED: "The check that you are a person did not pass. Try again.",
  TOKEN_EXPIRED: "This link or code has expired. Ask for a new one.",
  INVALID_TOKEN: "This link or code is not valid, or was already used.",
  WORKFLOW_LIVE: "The campaign is running: pause it before changing it.",
  WORKFLOW_NOT_LIVE: "The campaign is not running.",
  WORKFLOW_RETIRED: "This campaign is retired: it cannot run or be changed.",
  RUN_IN_PROGRESS: "A run of this campaign is in progress: pause or finish it first.",
  APPROVAL_EXPIRED: "This approval ran out of time.",
  APPROVAL_ALREADY_DECIDED: "Someone already decided this approval.",
  CALL_NOT_LIVE: "The call has ended: there is nothing to listen to.",
  CALL_NOT_HEARD: "This call is not heard as audio (it has no media stream), so it cannot be listened to.",
  NOT_FOUND: "That is no longer there. Reload the page to see what is.",
  PAYLOAD_TOO_LARGE: "The file is too large.",
  UNSUPPORTED_MEDIA_TYPE: "That kind of file cannot be used here.",
  WEBHOOK_ENDPOINT_LIMIT: "This workspace has as many webhook endpoints as it may. Delete one first.",
  PAYMENT_METHOD_REQUIRED:
    "Autocharge needs a saved payment method: top up once with “Save the payment method”, then turn it on.",
  BAD_JSON: "The request could not be read. Reload the page and try again.",
  BAD_REQUEST: "The request could not be read. Reload the page and try again.",
  METHOD_NOT_ALLOWED: "The request could not be read. Reload the page and try again.",
  ENCRYPTION_UNAVAILABLE: "Secrets cannot be stored on this server yet (no encryption key is set up).",
}

/**
 * A take-over's refusals (POST /api/calls/{id}/take-over) whose general words would mislead: the call
 * ended is not "nothing to listen to", and a failed conference is not worth trying again.
 */
const TAKE_OVER_REFUSALS: Readonly<Record<string, string>> = {
  CALL_NOT_LIVE: "The call has ended: there is no one left to hand over.",
  CALL_HANDED_OFF: "This call was already handed over to a person.",
  CONFLICT: "No one is on the line yet (the call is ringing, at voicemail or ending). Try again once they talk.",
  GATEWAY_UNAVAILABLE:
    "The operator did not answer, so the hand-over failed: the callee was let go and the call ended.",
}

/** The words for a take-over's refusal with this code, where they differ from the general ones. */
export const takeOverRefusalWords = (code: string): string | undefined => TAKE_OVER_REFUSALS[code]

/** The words for an error the API answered (or a network failure). */
export function errorWords(e: ErrorBody): string {
  const fixed = FIXED[e.code]
  if (fixed !== undefined) return fixed
  switch (e.code) {
    case "RATE_LIMITED":
      return e.retryAfterSeconds === undefined
        ? "Too many requests just now. Wait a moment and try again."
        : `Too many requests just now. Try again ${inAbout(e.retryAfterSeconds)}.`
    case "WORKFLOW_NOT_READY": {
      const missing = Array.isArray(e.body["missing"])
        ? (e.body["missing"] as unknown[]).map(String)
        : Array.isArray((e.body["details"] as { missing?: unknown } | undefined)?.missing)
          ? ((e.body["details"] as { missing: unknown[] }).missing as unknown[]).map(String)
          : []
      if (missing.length === 0) return "Not ready yet: the campaign still needs setting up."
      if (missing.length === 1 && missing[0] === "email_verified")
        return "Verify your email address first: open the link in the verification email (or send it again above)."
      return `Not ready to run yet. It still needs ${listWords(missing.map((m) => missingWords(m)))}.`
    }
    case "INSUFFICIENT_FUNDS":
      return "The wallet's balance does not cover this. Top up on the Wallet page, then try again."
    case "VALIDATION_FAILED":
    case "RULE_BOOK_INVALID":
    case "IMPORT_INVALID":
      if (e.errors.length === 0) return sentence(e.message)
      return e.errors.map((x) => sentence(`${fieldWords(x.field)} ${x.message}`)).join(" ")
    default:
      return e.code.startsWith("HTTP_") && e.status >= 500 ? FIXED["INTERNAL"]! : sentence(e.message)
  }
}
