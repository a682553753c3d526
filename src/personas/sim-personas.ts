// The simulated callees of the sim carrier (GET /api/sim/personas): one per behaviour, each with
// the last digits that select it, read from the carrier's own digit table so the two never differ.
import { SIM_CALLEE_BY_DIGIT, type SimCallee } from "../providers/telephony/sim.telephony.js"

export interface SimPersona {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly behaviour: SimCallee
  /** The last digit of a dialed number that selects this callee (the first, when several do). */
  readonly suffix: string
  /** Every last digit that selects it. */
  readonly digits: readonly number[]
}

/** Who each behaviour is, for people reading a simulated run. */
const CALLEES: Readonly<Record<SimCallee, { readonly name: string; readonly description: string }>> = {
  no_answer: { name: "Nobody Home", description: "The phone rings out: no answer." },
  busy: { name: "Busy Line", description: "A busy tone: the call never connects." },
  voicemail: {
    name: "Voicemail",
    description:
      "An answering machine picks up and plays a greeting, then hangs up; the rule book's voicemail setting " +
      "decides whether the agent leaves its opening line.",
  },
  agrees: {
    name: "Interested Buyer",
    description: "Answers, listens, and agrees to what the agent offers.",
  },
  declines: {
    name: "Polite Decliner",
    description: "Answers, objects that they do not need it, then declines.",
  },
  wants_discount: {
    name: "Discount Seeker",
    description:
      "Interested but asks for a discount: accepts once one is offered (the agent proposes a concession, which " +
      "may need approval), declines if told no.",
  },
  wants_callback: {
    name: "Call-Me-Back",
    description:
      "Busy right now and asks to be called back tomorrow (a callback proposal); declines if the agent cannot.",
  },
  wants_human: {
    name: "Wants a Human",
    description: "Asks to speak to a real person (an escalation proposal); declines if the agent cannot transfer.",
  },
}

/** One entry per behaviour, in the order of the digits that select them. */
export const SIM_PERSONAS: readonly SimPersona[] = (() => {
  const digits = new Map<SimCallee, number[]>()
  SIM_CALLEE_BY_DIGIT.forEach((behaviour, digit) => {
    const list = digits.get(behaviour)
    if (list === undefined) digits.set(behaviour, [digit])
    else list.push(digit)
  })
  return [...digits].map(([behaviour, ds]) => ({
    id: behaviour.replace(/_/g, "-"),
    ...CALLEES[behaviour],
    behaviour,
    suffix: String(ds[0]),
    digits: ds,
  }))
})()
