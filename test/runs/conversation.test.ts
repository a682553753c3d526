// The agent loop over the sim telephony and the sim language model: each last digit reaches its
// outcome under approving, denying and silent approvers; turn order, disclosure, determinism,
// abort, model failures, turn caps, voicemail, scaled timing and 1,000 concurrent calls.
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import {
  type ConversationOptions,
  type ConversationResult,
  type ConversationTurn,
  converse,
} from "../../src/calls/conversation.js"
import type { DecisionStatus, LanguageModel, Proposal, ReplyRequest } from "../../src/providers/llm/llm.interface.js"
import { makeSimLlm, SIM_TURN_CAP, simConcessionMinor, simulateReply } from "../../src/providers/llm/sim.llm.js"
import { makeSimTelephony } from "../../src/providers/telephony/sim.telephony.js"
import {
  type CallLeg,
  type CarrierEvent,
  TelephonyError,
  type TelephonyProvider,
} from "../../src/providers/telephony/telephony.interface.js"
import { type LibraryObjection, type RuleBook, validateRuleBook } from "../../src/workflows/rulebook.schema.js"
import { simulateRuleBook } from "../../src/workflows/rulebook.sim-writer.js"
import { stopSharedServers } from "../support/harness.js"

// No shared server runs beside this suite: it fakes the process's timers, which would be theirs too.
beforeAll(stopSharedServers)

const OBJECTIONS: LibraryObjection[] = [
  {
    id: 1,
    category: "price",
    trigger_text: "It's too expensive.",
    rebuttal_template:
      "I understand, cost matters. Many customers changed their mind once they saw what {offer} saves them.",
  },
  {
    id: 3,
    category: "timing",
    trigger_text: "I'm busy right now.",
    rebuttal_template: "Of course, I can call back. Would {callback_window} work better for you?",
  },
  {
    id: 5,
    category: "need",
    trigger_text: "I don't need this.",
    rebuttal_template: "Understood. May I ask what you use today?",
  },
  {
    id: 14,
    category: "do_not_call",
    trigger_text: "Don't call me again.",
    rebuttal_template: "Understood. You won't hear from {company} again.",
  },
]

function ruleBook(prompt: string): RuleBook {
  const raw = simulateRuleBook({ prompt, currency: "INR", country: "IN", planTier: "free", objections: OBJECTIONS })
  const v = validateRuleBook(raw, { currency: "INR", planTier: "free" })
  if (!v.ok) throw new Error(JSON.stringify(v.errors))
  return v.value
}

const BOOK = ruleBook(
  "Call our broadband customers about the new fibre plan and offer a discount of up to ₹800 on the first month.",
)
const VOICEMAIL_BOOK = ruleBook(
  "Call our broadband customers about the new fibre plan; leave a voicemail if nobody answers.",
)
const DISCLOSURE = "This call is from Acme Broadband and may be recorded for quality."

type Approver = "approve" | "deny" | "timeout"
const decide: Record<Approver, DecisionStatus> = { approve: "approved", deny: "denied", timeout: "timeout" }

interface CallRun {
  events: CarrierEvent[]
  turns: ConversationTurn[]
  proposals: Proposal[]
  result: ConversationResult | undefined
}

interface CallOptions {
  approver?: Approver
  book?: RuleBook
  llm?: LanguageModel
  name?: string | null
  signal?: AbortSignal
  maxTurns?: number
  requestApproval?: ConversationOptions["requestApproval"]
  onTurn?: (t: ConversationTurn) => void
}

/** Dials `to`, and once answered runs the conversation to its end. */
async function call(tel: TelephonyProvider, to: string, o: CallOptions = {}, callId = 1): Promise<CallRun> {
  const run: CallRun = { events: [], turns: [], proposals: [], result: undefined }
  let answer!: (by: "human" | "machine" | null) => void
  const answered = new Promise<"human" | "machine" | null>((r) => (answer = r))
  const leg = tel.dial({ callId, to, from: null, tenantId: 1 }, (e) => {
    run.events.push(e)
    if (e.type === "ANSWERED") answer(e.by)
    else if (e.type !== "RINGING") answer(null)
  })
  const by = await answered
  if (by === null) return run
  run.result = await converse({
    leg,
    llm: o.llm ?? makeSimLlm(),
    ruleBook: o.book ?? BOOK,
    callee: { name: o.name === undefined ? "Asha" : o.name },
    agentName: "Priya",
    company: "Acme Broadband",
    answeredBy: by,
    onTurn: (t) => {
      run.turns.push(t)
      o.onTurn?.(t)
    },
    requestApproval:
      o.requestApproval ??
      (async (p) => {
        run.proposals.push(p)
        return decide[o.approver ?? "approve"]
      }),
    signal: o.signal ?? new AbortController().signal,
    ...(o.maxTurns !== undefined && { maxTurns: o.maxTurns }),
  })
  return run
}

const number = (digit: number, prefix = "+9198765432") => `${prefix}1${digit}`
const kinds = (events: CarrierEvent[]) =>
  events.map((e) => (e.type === "ANSWERED" || e.type === "HANGUP" ? `${e.type}:${e.by}` : e.type))
const transcript = (turns: ConversationTurn[]) => turns.map((t) => `${t.speaker}: ${t.text}`)

function expectWellFormed(run: CallRun): void {
  const turns = run.turns
  expect(turns.map((t) => t.turnIndex)).toEqual(turns.map((_, i) => i))
  for (let i = 1; i < turns.length; i++) expect(turns[i]!.at).toBeGreaterThanOrEqual(turns[i - 1]!.at)
  for (const t of turns) expect(t.text.trim()).not.toBe("")
  for (const t of turns) expect(t.text).not.toMatch(/\{(name|agent_name|company)\}/)
  expect(run.result?.turns).toBe(turns.length)
}

afterEach(() => {
  vi.useRealTimers()
})

describe("conversation over the sim carrier and sim model", () => {
  const expected: Record<Approver, Record<number, string>> = {
    approve: {
      3: "agreed",
      4: "agreed",
      5: "agreed",
      6: "declined",
      7: "agreed_with_concession",
      8: "callback_scheduled",
      9: "escalated",
    },
    deny: { 3: "agreed", 4: "agreed", 5: "agreed", 6: "declined", 7: "declined", 8: "declined", 9: "declined" },
    timeout: {
      3: "agreed",
      4: "agreed",
      5: "agreed",
      6: "declined",
      7: "pending_approval",
      8: "pending_approval",
      9: "pending_approval",
    },
  }
  const proposed: Record<number, Proposal["action"] | undefined> = { 7: "concession", 8: "callback", 9: "escalate" }

  for (const approver of ["approve", "deny", "timeout"] as const) {
    it.each([3, 4, 5, 6, 7, 8, 9])(`digit %i with an approver that says ${approver}`, async (digit) => {
      const tel = makeSimTelephony({ timeScale: 0.001 })
      const run = await call(tel, number(digit), { approver })
      expect(run.result?.outcome).toBe(expected[approver][digit])
      expect(run.result?.calleeHungUp).toBe(false)
      expect(kinds(run.events)).toEqual(["RINGING", "ANSWERED:human", "HANGUP:agent"])
      expect(tel.activeLegs).toBe(0)
      expectWellFormed(run)
      // The first turn is the agent's: disclosure first, then the opening line, filled in.
      expect(run.turns[0]).toMatchObject({ speaker: "agent", turnIndex: 0 })
      expect(run.turns[0]!.text.startsWith(DISCLOSURE)).toBe(true)
      expect(run.turns[0]!.text).toContain(
        "Hello Asha, this is Priya calling from Acme Broadband about the new fibre plan.",
      )
      expect(run.turns.length).toBeGreaterThanOrEqual(4)
      expect(run.turns.filter((t) => t.speaker === "callee").length).toBeGreaterThanOrEqual(1)
      const action = proposed[digit]
      expect(run.proposals.map((p) => p.action)).toEqual(action === undefined ? [] : [action])
      if (action === "concession") expect(run.proposals[0]!.value_minor).toBe(simConcessionMinor(BOOK))
      if (action !== undefined && action !== "concession") expect(run.proposals[0]!.value_minor).toBeNull()
      for (const p of run.proposals) expect(p.rationale).not.toBe("")
    })
  }

  it("offers the approved concession in words, as half the cap", async () => {
    expect(simConcessionMinor(BOOK)).toBe(40_000)
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(7))
    expect(run.turns.some((t) => t.speaker === "agent" && t.text.includes("₹400.00 off"))).toBe(true)
  })

  it("ends unanswered and busy calls without a conversation", async () => {
    const tel = makeSimTelephony({ timeScale: 0.001 })
    const noAnswer = await call(tel, number(0))
    expect(kinds(noAnswer.events)).toEqual(["RINGING", "NO_ANSWER"])
    const busy = await call(tel, number(1))
    expect(kinds(busy.events)).toEqual(["BUSY"])
    expect(noAnswer.turns).toEqual([])
    expect(busy.result).toBeUndefined()
    expect(tel.activeLegs).toBe(0)
  })

  it("hangs up on voicemail, or leaves the opening line when the rule book says so", async () => {
    const tel = makeSimTelephony({ timeScale: 0.001 })
    const hangUp = await call(tel, number(2))
    expect(hangUp.result).toEqual({ outcome: "voicemail", turns: 0, calleeHungUp: false })
    expect(kinds(hangUp.events)).toEqual(["RINGING", "ANSWERED:machine", "HANGUP:agent"])

    expect(VOICEMAIL_BOOK.voicemail).toBe("leave_opening_line")
    const left = await call(tel, number(2), { book: VOICEMAIL_BOOK })
    expect(left.result?.outcome).toBe("voicemail_left")
    expect(left.turns.map((t) => t.speaker)).toEqual(["callee", "agent"])
    expect(left.turns[1]!.text.startsWith(DISCLOSURE)).toBe(true)
    expectWellFormed(left)
    expect(tel.activeLegs).toBe(0)
  })

  it("gives the same transcript for the same number, another phrasing for another", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    for (const digit of [3, 6, 7]) {
      const a = await call(tel, number(digit))
      const b = await call(makeSimTelephony({ timeScale: 0.001 }), number(digit))
      expect(transcript(b.turns)).toEqual(transcript(a.turns))
    }
    const phrasings = new Set<string>()
    for (let i = 0; i < 12; i++)
      phrasings.add((await call(tel, `+91987654${String(i).padStart(3, "0")}3`)).turns[1]!.text)
    expect(phrasings.size).toBeGreaterThan(1)
  })

  it("fills in no name when the callee's name is unknown", async () => {
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(3), { name: null })
    expect(run.result?.outcome).toBe("agreed")
    expect(run.turns[0]!.text).toContain("Hello, this is Priya calling from Acme Broadband")
    for (const t of run.turns) expect(t.text).not.toMatch(/ ,|,[.,]|\s\./)
  })
})

describe("conversation: stopping", () => {
  it("stops promptly when aborted mid-call, and hangs up", async () => {
    // Scale 0.1: the opening takes about 1.5 s to speak; the abort comes as it starts.
    const tel = makeSimTelephony({ timeScale: 0.1 })
    const controller = new AbortController()
    let abortedAt = 0
    const run = await call(tel, number(3), {
      signal: controller.signal,
      onTurn: () =>
        setTimeout(() => {
          abortedAt = Date.now()
          controller.abort()
        }, 20),
    })
    expect(Date.now() - abortedAt).toBeLessThan(100)
    expect(run.result).toEqual({ outcome: "aborted", turns: 1, calleeHungUp: false })
    expect(kinds(run.events)).toEqual(["RINGING", "ANSWERED:human", "HANGUP:agent"])
    expect(tel.activeLegs).toBe(0)
  })

  it("stops while waiting for a human decision", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    const controller = new AbortController()
    let asked!: () => void
    const askedP = new Promise<void>((r) => (asked = r))
    const pending = call(tel, number(7), {
      signal: controller.signal,
      requestApproval: () => {
        asked()
        return new Promise<DecisionStatus>(() => {})
      },
    })
    await askedP
    controller.abort()
    const run = await pending
    expect(run.result?.outcome).toBe("aborted")
    expect(kinds(run.events).at(-1)).toBe("HANGUP:agent")
    expect(tel.activeLegs).toBe(0)
  })

  it("does nothing but hang up when aborted before the start", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    const run = await call(tel, number(3), { signal: AbortSignal.abort() })
    expect(run.result).toEqual({ outcome: "aborted", turns: 0, calleeHungUp: false })
    expect(tel.activeLegs).toBe(0)
  })

  it("ends with no_decision at the turn cap", async () => {
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(6), { maxTurns: 3 })
    expect(run.result).toEqual({ outcome: "no_decision", turns: 3, calleeHungUp: false })
  })

  it("reports a callee who hangs up, unless the call already had its outcome", async () => {
    // A model that never concludes: the sim callee loses patience and hangs up.
    const stubborn: LanguageModel = { ...makeSimLlm(), reply: async () => ({ text: "Hmm, tell me more?" }) }
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(4), { llm: stubborn, maxTurns: 100 })
    expect(run.result).toMatchObject({ outcome: "callee_hung_up", calleeHungUp: true })
    expect(kinds(run.events).at(-1)).toBe("HANGUP:callee")
    expectWellFormed(run)
  })
})

describe("conversation: a leg that drops", () => {
  /** A scripted leg: the callee says `lines`, and the line is dropped during agent say number `dropOnSay`. */
  function scriptedLeg(lines: string[], dropOnSay: number) {
    let says = 0
    let gone = false
    const leg: CallLeg = {
      providerCallId: "fake-1",
      say: async () => {
        if (gone || ++says === dropOnSay) {
          gone = true
          throw new TelephonyError("gone", false)
        }
        return { durationMs: 0 }
      },
      listen: async () => (gone ? null : { text: lines.shift() ?? "", at: Date.now() }),
      hangup: async () => {
        hangups++
      },
    }
    let hangups = 0
    return { leg, hangups: () => hangups }
  }
  const base = (leg: CallLeg): ConversationOptions => ({
    leg,
    llm: makeSimLlm(),
    ruleBook: BOOK,
    callee: { name: "Asha" },
    agentName: "Priya",
    company: "Acme Broadband",
    onTurn: () => {},
    requestApproval: async () => "approved",
    signal: new AbortController().signal,
  })

  it("keeps an outcome reached before the callee hung up on the last line", async () => {
    const s = scriptedLeg(["Please don't call me again."], 2)
    const result = await converse(base(s.leg))
    expect(result).toEqual({ outcome: "do_not_call", turns: 3, calleeHungUp: true })
    expect(s.hangups()).toBe(1)
  })

  it("reports callee_hung_up when the line drops mid-conversation", async () => {
    const s = scriptedLeg(["Yes, I have a minute."], 2)
    const result = await converse(base(s.leg))
    expect(result).toEqual({ outcome: "callee_hung_up", turns: 3, calleeHungUp: true })
    expect(s.hangups()).toBe(1)
  })
})

describe("conversation: model failures", () => {
  it("retries a failed reply once and carries on", async () => {
    const sim = makeSimLlm()
    let calls = 0
    const flaky: LanguageModel = {
      ...sim,
      reply: async (req) => {
        calls++
        if (calls === 1) throw new Error("model unavailable")
        return sim.reply(req)
      },
    }
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(3), { llm: flaky })
    expect(run.result?.outcome).toBe("agreed")
  })

  it("ends politely with agent_error after the retry fails too", async () => {
    let calls = 0
    const broken: LanguageModel = {
      ...makeSimLlm(),
      reply: async () => {
        calls++
        throw new Error("model unavailable")
      },
    }
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(3), { llm: broken })
    expect(calls).toBe(2)
    expect(run.result?.outcome).toBe("agent_error")
    const last = run.turns.at(-1)!
    expect(last.speaker).toBe("agent")
    expect(last.text).toContain("Acme Broadband will get back to you")
    expect(kinds(run.events).at(-1)).toBe("HANGUP:agent")
  })

  it("treats an empty reply as a failure", async () => {
    const empty: LanguageModel = { ...makeSimLlm(), reply: async () => ({ text: "  " }) }
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(5), { llm: empty })
    expect(run.result?.outcome).toBe("agent_error")
  })
})

describe("conversation: approvals", () => {
  it("does not ask a human when the policy needs no approval, nor when it forbids the action", async () => {
    const noApproval: RuleBook = { ...BOOK, callback_policy: { ...BOOK.callback_policy, requires_approval: false } }
    const asked: Proposal[] = []
    const requestApproval = async (p: Proposal): Promise<DecisionStatus> => {
      asked.push(p)
      return "denied"
    }
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(8), { book: noApproval, requestApproval })
    expect(run.result?.outcome).toBe("callback_scheduled")
    expect(asked).toEqual([])

    const noConcessions = ruleBook("Call our broadband customers about the new fibre plan.")
    expect(noConcessions.concession_policy.allowed).toBe(false)
    const declined = await call(makeSimTelephony({ timeScale: 0 }), number(7), { book: noConcessions, requestApproval })
    expect(declined.result?.outcome).toBe("declined")
    expect(asked).toEqual([])
  })

  it("clamps a concession above the cap and reuses a decision the human already gave", async () => {
    const sim = makeSimLlm()
    let proposals = 0
    const greedy: LanguageModel = {
      ...sim,
      reply: async (req) => {
        const r = await sim.reply(req)
        if (r.propose?.action === "concession") return { ...r, propose: { ...r.propose, value_minor: 10_000_000 } }
        // Asks again once after the denial: the earlier answer stands.
        if (req.decision?.status === "denied" && proposals++ === 0) {
          return {
            text: "Let me check once more; one moment.",
            propose: { action: "concession", value_minor: 1, rationale: "again" },
          }
        }
        return r
      },
    }
    const seen: Proposal[] = []
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(7), {
      llm: greedy,
      requestApproval: async (p) => {
        seen.push(p)
        return "denied"
      },
    })
    expect(seen).toHaveLength(1)
    expect(seen[0]!.value_minor).toBe(BOOK.concession_policy.cap_minor)
    expect(run.result?.outcome).toBe("declined")
  })

  it("counts a failing approval request as a timeout", async () => {
    const run = await call(makeSimTelephony({ timeScale: 0 }), number(9), {
      requestApproval: () => Promise.reject(new Error("bus down")),
    })
    expect(run.result?.outcome).toBe("pending_approval")
  })
})

describe("sim model replies", () => {
  const req = (history: Array<["agent" | "callee", string]>, over: Partial<ReplyRequest> = {}): ReplyRequest => ({
    ruleBook: BOOK,
    history: history.map(([speaker, text]) => ({ speaker, text })),
    callee: { name: "Asha" },
    agentName: "Priya",
    company: "Acme Broadband",
    ...over,
  })
  const opening = ["agent", "Hello, do you have a minute?"] as ["agent", string]

  it("answers an objection with the best-matching handler", () => {
    expect(simulateReply(req([opening, ["callee", "Honestly, I don't really need this."]])).text).toBe(
      "Understood. May I ask what you use today?",
    )
  })

  it("ends with do_not_call when asked never to call again", () => {
    const r = simulateReply(req([opening, ["callee", "Please don't call me again."]]))
    expect(r).toEqual({
      text: "Understood. You won't hear from Acme Broadband again.",
      end: { outcome: "do_not_call" },
    })
  })

  it("stops at its own turn cap", () => {
    const history = Array.from({ length: SIM_TURN_CAP - 1 }, (_, i): ["agent" | "callee", string] =>
      i % 2 === 0 ? ["agent", "Shall we?"] : ["callee", "Hmm."],
    )
    expect(simulateReply(req(history)).end).toEqual({ outcome: "no_decision" })
  })

  it("says it cannot offer a discount when the rule book allows none", () => {
    const book = ruleBook("Call our broadband customers about the new fibre plan.")
    const r = simulateReply(req([opening, ["callee", "Can you give me a discount?"]], { ruleBook: book }))
    expect(r.propose).toBeUndefined()
    expect(r.text).toMatch(/can't offer a discount/)
  })
})

describe("conversation: timing and scale", () => {
  /** One call under fake timers; returns its duration from the first carrier event to the last. */
  async function timed(timeScale: number, digit: number): Promise<number> {
    vi.useFakeTimers()
    try {
      const tel = makeSimTelephony({ timeScale })
      const pending = call(tel, number(digit))
      await vi.runAllTimersAsync()
      const run = await pending
      expect(run.result?.outcome).toBe(digit === 7 ? "agreed_with_concession" : "agreed")
      return run.events.at(-1)!.at - run.events[0]!.at
    } finally {
      vi.useRealTimers()
    }
  }

  it("takes about 1/100 of the time at scale 0.01", async () => {
    for (const digit of [3, 7]) {
      const full = await timed(1, digit)
      const scaled = await timed(0.01, digit)
      // A realistic call: ring plus several turns of speech.
      expect(full).toBeGreaterThan(20_000)
      expect(full).toBeLessThan(120_000)
      expect(scaled / full).toBeGreaterThan(0.0095)
      expect(scaled / full).toBeLessThan(0.0105)
    }
  })

  it("runs 1,000 concurrent calls to their outcomes at scale 0, leaving no legs", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    const runs = await Promise.all(
      Array.from({ length: 1_000 }, (_, i) => call(tel, `+9190${String(i).padStart(8, "0")}`, {}, i)),
    )
    expect(tel.activeLegs).toBe(0)
    const outcomes = new Map<number, Set<string | undefined>>()
    runs.forEach((run, i) => {
      const digit = i % 10
      const set = outcomes.get(digit) ?? new Set()
      set.add(run.result?.outcome)
      outcomes.set(digit, set)
    })
    expect(Object.fromEntries([...outcomes].map(([d, s]) => [d, [...s]]))).toEqual({
      0: [undefined],
      1: [undefined],
      2: ["voicemail"],
      3: ["agreed"],
      4: ["agreed"],
      5: ["agreed"],
      6: ["declined"],
      7: ["agreed_with_concession"],
      8: ["callback_scheduled"],
      9: ["escalated"],
    })
  })
})
