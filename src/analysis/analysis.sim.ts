// The analysis simulator: the platform's stand-in model for post-call analysis, a pure function of
// the call (its transcript, outcome and the sim callee's behaviour), so tests can assert exact values.
import { type SimCallee, simCalleeFor } from "../providers/telephony/sim.telephony.js"
import {
  type AnalysisAnswer,
  type AnalysisField,
  clipSummary,
  FIELD_TEXT_MAX_CHARS,
  type FieldValue,
  type Sentiment,
} from "./analysis.schema.js"

export interface CallForAnalysis {
  readonly phone: string
  readonly calleeName: string | null
  readonly outcome: string | null
  readonly connectedSeconds: number
  readonly endedAt: Date
  readonly transcript: ReadonlyArray<{ readonly speaker: string; readonly text: string }>
}

/** Outcomes that meet a campaign's goal. */
const GOAL_OUTCOMES: ReadonlySet<string> = new Set(["agreed", "agreed_with_concession"])
const NEGATIVE_OUTCOMES: ReadonlySet<string> = new Set(["declined", "do_not_call"])

/** What the callee wanted, in the summary's words, by sim behaviour (a number's last digit). */
const BEHAVIOUR_LINE: Readonly<Record<SimCallee, string>> = {
  no_answer: "did not answer",
  busy: "was busy",
  voicemail: "reached voicemail",
  agrees: "was interested",
  declines: "objected that they did not need the offer",
  wants_discount: "asked for a discount",
  wants_callback: "asked to be called back tomorrow",
  wants_human: "asked to speak to a human",
}

const OUTCOME_LINE: Readonly<Record<string, string>> = {
  agreed: "agreed to go ahead",
  agreed_with_concession: "agreed to go ahead with the approved discount",
  declined: "declined",
  callback_scheduled: "was promised a callback",
  escalated: "was handed to a colleague",
  pending_approval: "ended the call while a decision was pending",
  do_not_call: "asked not to be called again",
  no_decision: "ended the call without a decision",
  callee_hung_up: "hung up",
  voicemail: "did not talk to the agent",
  voicemail_left: "had a message left on their voicemail",
  agent_error: "was cut off by an agent error",
  aborted: "was cut off",
}

function sentimentOf(outcome: string | null, behaviour: SimCallee | undefined): Sentiment {
  if (outcome !== null && GOAL_OUTCOMES.has(outcome)) return "positive"
  if (outcome !== null && NEGATIVE_OUTCOMES.has(outcome)) return "negative"
  if (behaviour === "declines") return "negative"
  return "neutral"
}

/**
 * The simulated analysis of a call. Goal and sentiment follow the outcome (agreed → met, positive;
 * declined or do-not-call → negative); the summary names who, what they asked for and how it
 * ended; each field is derived from the transcript by its type (see fieldValue).
 */
export function simulateAnalysis(call: CallForAnalysis, fields: ReadonlyArray<AnalysisField>): AnalysisAnswer {
  const behaviour = simCalleeFor(call.phone)
  const who = call.calleeName ?? "The callee"
  const wanted = behaviour === undefined ? "took the call" : BEHAVIOUR_LINE[behaviour]
  const ended = OUTCOME_LINE[call.outcome ?? ""] ?? `ended with outcome ${call.outcome ?? "unknown"}`
  const goalMet = call.outcome !== null && GOAL_OUTCOMES.has(call.outcome)
  const summary = clipSummary(`${who} ${wanted} and ${ended}.`)
  const sentiment = sentimentOf(call.outcome, behaviour)
  const values: Record<string, FieldValue> = {}
  for (const f of fields) values[f.name] = fieldValue(f, call, goalMet, sentiment)
  return { summary, goal_met: goalMet, sentiment, fields: values }
}

const calleeLines = (call: CallForAnalysis) => call.transcript.filter((t) => t.speaker === "callee").map((t) => t.text)
const NUMBER = /(?<![\w.])\d+(?:\.\d+)?(?![\w.])/
const EMAIL = /[\w.+-]+@[\w-]+(?:\.[\w-]+)+/
const LATER = /\b(?:tomorrow|call (?:me )?back|another time|later)\b/i
const NAME_FIELD = /(?:^|_)name(?:$|_)/
const REASON_FIELD = /reason|objection|why|concern/

/**
 * A field's simulated value, the first rule that applies:
 * boolean → goal_met; number → the first number the callee said, else the agent, else null;
 * enum → the first value the transcript mentions (underscores read as spaces), else the value named
 * like the sentiment or the outcome, else null; date → the day after the call when the callee asked
 * for later, else null; phone → the number dialed; email → the first address in the transcript;
 * string → the callee's name for a *name* field, the callee's first line for a reason/objection
 * field, else the callee's last line (null with no callee line).
 */
function fieldValue(f: AnalysisField, call: CallForAnalysis, goalMet: boolean, sentiment: Sentiment): FieldValue {
  const callee = calleeLines(call)
  const all = call.transcript.map((t) => t.text)
  switch (f.type) {
    case "boolean":
      return goalMet
    case "number": {
      const said = [...callee, ...call.transcript.filter((t) => t.speaker !== "callee").map((t) => t.text)]
      for (const line of said) {
        const m = NUMBER.exec(line.replace(/,(?=\d{3})/g, ""))
        if (m !== null) return Number(m[0])
      }
      return null
    }
    case "enum": {
      const values = f.enum ?? []
      const text = all.join(" ").toLowerCase()
      const mentioned = values.find((v) =>
        new RegExp(`\\b${escapeRegExp(v.toLowerCase().replace(/_/g, " "))}\\b`).test(text),
      )
      if (mentioned !== undefined) return mentioned
      const named = values.find((v) => [sentiment, call.outcome ?? ""].includes(v.toLowerCase()))
      return named ?? null
    }
    case "date": {
      if (!callee.some((l) => LATER.test(l))) return null
      return new Date(call.endedAt.getTime() + 86_400_000).toISOString().slice(0, 10)
    }
    case "phone":
      return call.phone
    case "email": {
      for (const line of all) {
        const m = EMAIL.exec(line)
        if (m !== null) return m[0]
      }
      return null
    }
    case "string": {
      if (NAME_FIELD.test(f.name)) return call.calleeName
      const line = REASON_FIELD.test(f.name) ? callee[0] : callee.at(-1)
      return line === undefined ? null : line.slice(0, FIELD_TEXT_MAX_CHARS)
    }
  }
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
