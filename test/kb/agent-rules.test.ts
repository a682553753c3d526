// The rules an agent obeys, without a server: matching (normalised lines, whole words, priority,
// triggers by phrase and by category), the simulator honouring them deterministically (a trigger's
// rule before the rule book's handler, never a banned line, policy flows untouched), the opening
// line, and the conversation loop's guard against a model that insists on a banned line.
import { describe, expect, it } from "vitest"
import { type ConversationTurn, converse } from "../../src/calls/conversation.js"
import { replyRules } from "../../src/kb/reply-rules.js"
import {
  type CallRules,
  firstAllowed,
  isBanned,
  NO_RULES,
  normaliseLine,
  prepareCallRules,
  ruleFor,
} from "../../src/kb/rule-matching.js"
import {
  type AgentReply,
  type AgentRule,
  fillPlaceholders,
  type LanguageModel,
  NEUTRAL_LINES,
  type ReplyRequest,
} from "../../src/providers/llm/llm.interface.js"
import { makeSimLlm, simulateReply } from "../../src/providers/llm/sim.llm.js"
import { makeSimTelephony } from "../../src/providers/telephony/sim.telephony.js"
import type { TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import { type LibraryObjection, type RuleBook, validateRuleBook } from "../../src/workflows/rulebook.schema.js"
import { simulateRuleBook } from "../../src/workflows/rulebook.sim-writer.js"

const OBJECTIONS: LibraryObjection[] = [
  {
    id: 1,
    category: "price",
    trigger_text: "It's too expensive.",
    rebuttal_template:
      "I understand, cost matters. Many customers changed their mind once they saw what {offer} saves.",
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
const WHO = { name: "Asha", agentName: "Priya", company: "Acme Broadband" }
/** Every disclosure line of a book, filled, as the first turn starts. */
const disclosures = (book: RuleBook) => book.disclosure_lines.map((l) => fillPlaceholders(l, WHO)).join(" ")
const DISCLOSURE = disclosures(BOOK)

let nextId = 1
const rule = (over: Partial<AgentRule> & Pick<AgentRule, "bucket" | "body">): AgentRule => ({
  id: nextId++,
  title: over.title ?? `rule ${nextId}`,
  trigger: null,
  priority: 0,
  ...over,
})
const ban = (body: string, priority = 0) => rule({ bucket: "banned_phrases", body, priority })

describe("agent rules: matching", () => {
  it("compares lines without case, punctuation or spacing", () => {
    expect(normaliseLine("Great — ONLY ₹499!")).toBe("great only ₹499")
    expect(normaliseLine("  Don\u2019t   worry,\tAsha. ")).toBe("don't worry asha")
    expect(normaliseLine("?!")).toBe("")
  })

  it("normalises non-ASCII lines alike (quotes, currency, other scripts)", () => {
    expect(normaliseLine("It\u2019s ₹499 — “only” today")).toBe("it's ₹499 only today")
    expect(normaliseLine("नमस्ते, आशा! क्या आपके पास एक मिनट है?")).toBe("नमस्ते आशा क्या आपके पास एक मिनट है")
    expect(normaliseLine("Café AU LAIT, s'il vous plaît")).toBe("café au lait s'il vous plaît")
    expect(normaliseLine("50% OFF: $20 …")).toBe("50% off $20")
  })

  it("fills each call's placeholders in banned lines, from rules compiled once", () => {
    const rules = [ban("Hello {name}, this is {agent_name} from {company}"), ban("{name}'s special price")]
    const asha = prepareCallRules(rules, WHO)
    const ravi = prepareCallRules(rules, { name: "Ravi Kumar", agentName: "Dev", company: "Zed & Co." })
    const nobody = prepareCallRules(rules, { ...WHO, name: null })
    expect(isBanned("Hello Asha, this is Priya from Acme Broadband.", asha)).toBe(true)
    expect(isBanned("Hello Asha, this is Priya from Acme Broadband.", ravi)).toBe(false)
    expect(isBanned("HELLO RAVI KUMAR — this is Dev from Zed & Co!", ravi)).toBe(true)
    expect(isBanned("Here is Asha's special price.", asha)).toBe(true)
    expect(isBanned("Hello, this is Priya from Acme Broadband.", nobody)).toBe(true)
    // Newest first at equal priority.
    expect(nobody.banned).toEqual(["'s special price", "hello this is priya from acme broadband"])
    expect(ravi.banned).toEqual(["ravi kumar's special price", "hello ravi kumar this is dev from zed co"])
  })

  it("prepares a call's rules: placeholders filled, highest priority (then newest) first", () => {
    const low = rule({ bucket: "opening", body: "Hi {name}, {agent_name} here.", priority: 1 })
    const high = rule({ bucket: "opening", body: "Good day {name}, it's {agent_name} from {company}.", priority: 5 })
    const newer = rule({ bucket: "closing", body: "Thanks {name}.", priority: 5 })
    const banned = ban("Trust me, {name}")
    const r = prepareCallRules([low, banned, high, newer], WHO)
    expect(r.rules.map((x) => x.id)).toEqual([newer.id, high.id, low.id, banned.id])
    expect(r.opening).toBe("Good day Asha, it's Priya from Acme Broadband.")
    expect(r.banned).toEqual(["trust me asha"])
    expect(r.triggered).toEqual([])
    expect(prepareCallRules([], WHO)).toBe(NO_RULES)
  })

  it("finds a banned line inside a longer one, by whole words, for this callee's name", () => {
    const r = prepareCallRules([ban("Trust me, {name}"), ban("ok")], WHO)
    expect(isBanned("Honestly — TRUST ME, Asha! It's great.", r)).toBe(true)
    expect(isBanned("Trust me Ravi", r)).toBe(false)
    expect(isBanned("Okay then.", r)).toBe(false)
    expect(isBanned("That's ok.", r)).toBe(true)
    expect(isBanned("Trust me, Asha", prepareCallRules([ban("Trust me, {name}")], { ...WHO, name: "Ravi" }))).toBe(
      false,
    )
    expect(isBanned("anything", NO_RULES)).toBe(false)
    // The same answer twice (the simulator's check, then the loop's) is judged alike.
    expect(isBanned("Trust me, Asha", r)).toBe(true)
    expect(isBanned("Trust me, Asha", r)).toBe(true)
  })

  it("picks the highest-priority rule whose phrase the callee said or whose category the objection is", () => {
    const byPhrase = rule({
      bucket: "objection.price",
      body: "Our plan pays for itself in a month.",
      trigger: { phrases: ["too expensive", "pricey"], category: null },
      priority: 1,
    })
    const byCategory = rule({
      bucket: "objection.price",
      body: "Let me explain the price.",
      trigger: { phrases: [], category: "price" },
      priority: 3,
    })
    const general = rule({ bucket: "compliance", body: "Never mention competitors." })
    const r = prepareCallRules([byPhrase, byCategory, general, ban("pricey")], WHO)
    expect(r.triggered.map((t) => t.rule.id)).toEqual([byCategory.id, byPhrase.id])
    expect(ruleFor("It's a bit PRICEY for me.", null, r)?.id).toBe(byPhrase.id)
    expect(ruleFor("It's a bit pricey for me.", "price", r)?.id).toBe(byCategory.id)
    expect(ruleFor("Hmm, that's too expensive.", "need", r)?.id).toBe(byPhrase.id)
    expect(ruleFor("Expensive, too.", null, r)).toBeUndefined()
    expect(ruleFor("I'm busy", "timing", r)).toBeUndefined()
    expect(ruleFor("pricey", "price", NO_RULES)).toBeUndefined()
    // What a model is given to make the same choice: the categories' rules that outrank the phrase's, then it.
    const given = (heard: string) => r.triggeredBy(heard).map((t) => [t.rule.id, t.category])
    expect(given("It's a bit PRICEY for me.")).toEqual([
      [byCategory.id, "price"],
      [byPhrase.id, null],
    ])
    expect(given("I'm busy")).toEqual([[byCategory.id, "price"]])
    expect(NO_RULES.triggeredBy("pricey")).toEqual([])
  })

  it("chooses the first allowed line", () => {
    const r = prepareCallRules([ban("first")], WHO)
    expect(firstAllowed(["The first one.", " ", "The second one."], r)).toBe("The second one.")
    expect(firstAllowed(["first"], r)).toBeUndefined()
  })
})

// ---------------------------------------------------------------------------------------------

/** A reply request after `history`, told of `rules` (and the lines to `avoid`) as the conversation loop tells it. */
const request = (
  history: Array<["agent" | "callee", string]>,
  o: { rules?: CallRules; avoid?: string[] } = {},
): ReplyRequest => {
  const lines = history.map(([speaker, text]) => ({ speaker, text }))
  return {
    ruleBook: BOOK,
    history: lines,
    callee: { name: WHO.name },
    agentName: WHO.agentName,
    company: WHO.company,
    ...replyRules(o.rules ?? NO_RULES, lines, o.avoid),
  }
}
const OPENING: ["agent", string] = ["agent", "Hello, do you have a minute?"]
const NEED = "Honestly, I don't really need this."
const NEED_RESPONSE = "Understood. May I ask what you use today?"

describe("the simulator honours the rules", () => {
  it("speaks a trigger's rule in place of the rule book's handler", () => {
    expect(simulateReply(request([OPENING, ["callee", NEED]])).text).toBe(NEED_RESPONSE)
    const phrase = rule({
      bucket: "objection.need",
      body: "Most of our customers said that too, {name}, until they saw the speed.",
      trigger: { phrases: ["don't really need"], category: null },
    })
    const rules = prepareCallRules([phrase], WHO)
    expect(simulateReply(request([OPENING, ["callee", NEED]], { rules })).text).toBe(
      "Most of our customers said that too, Asha, until they saw the speed.",
    )
    // A line the trigger does not meet keeps the handler.
    expect(simulateReply(request([OPENING, ["callee", "I don't need this."]], { rules })).text).toBe(NEED_RESPONSE)
  })

  it("matches a rule by the category of the handler the line would get", () => {
    const byCategory = rule({
      bucket: "objection.need",
      body: "What do you use today, {name}?",
      trigger: { phrases: [], category: "need" },
    })
    const other = rule({
      bucket: "objection.price",
      body: "It pays for itself.",
      trigger: { phrases: [], category: "price" },
    })
    const rules = prepareCallRules([byCategory, other], WHO)
    expect(simulateReply(request([OPENING, ["callee", NEED]], { rules })).text).toBe("What do you use today, Asha?")
  })

  it("keeps the policy flows: do-not-call, the second decline and the discount ask", () => {
    const greedy = rule({
      bucket: "objection.any",
      body: "Let me tell you more.",
      trigger: { phrases: ["call", "not interested", "discount"], category: null },
    })
    const rules = prepareCallRules([greedy], WHO)
    expect(simulateReply(request([OPENING, ["callee", "Don't call me again."]], { rules })).end).toEqual({
      outcome: "do_not_call",
    })
    const twice = request(
      [
        OPENING,
        ["callee", "No thanks, I'm not interested."],
        ["agent", "May I explain?"],
        ["callee", "Not interested."],
      ],
      { rules },
    )
    expect(simulateReply(twice).end).toEqual({ outcome: "declined" })
    expect(simulateReply(request([OPENING, ["callee", "Any discount?"]], { rules })).propose?.action).toBe("concession")
    expect(simulateReply(request([OPENING, ["callee", "No thanks, I'm not interested."]], { rules })).text).toBe(
      "Let me tell you more.",
    )
  })

  it("says the handler, the pitch or a neutral line instead of a banned one, keeping the ending", () => {
    const banHandler = prepareCallRules([ban(NEED_RESPONSE)], WHO)
    const a = simulateReply(request([OPENING, ["callee", NEED]], { rules: banHandler }))
    expect(a.text).toMatch(/^Thank you, Asha\. I'm calling about the new fibre plan/)
    const both = prepareCallRules([ban(NEED_RESPONSE), ban("Thank you, {name}. I'm calling about")], WHO)
    expect(simulateReply(request([OPENING, ["callee", NEED]], { rules: both })).text).toBe(
      fillPlaceholders(NEUTRAL_LINES[0]!, WHO),
    )
    // An ending keeps its outcome with another line.
    const agreed: Array<["agent" | "callee", string]> = [
      OPENING,
      ["callee", "Sure."],
      ["agent", "Shall we?"],
      ["callee", "Yes, let's do it."],
    ]
    const plain = simulateReply(request(agreed))
    expect(plain.end).toEqual({ outcome: "agreed" })
    const banned = simulateReply(request(agreed, { rules: prepareCallRules([ban("noted that you're in")], WHO) }))
    expect(banned.end).toEqual({ outcome: "agreed" })
    expect(banned.text).not.toBe(plain.text)
    expect(banned.text).not.toMatch(/noted that you're in/)
    // Told to avoid a line, it does.
    const avoided = simulateReply(request(agreed, { avoid: [plain.text] }))
    expect(avoided.text).not.toBe(plain.text)
    expect(avoided.end).toEqual({ outcome: "agreed" })
  })

  it("never says a line banned from earlier calls, over every callee behaviour, and needs no guard", async () => {
    // First every line the simulator says on these calls, then the same calls with all of them banned.
    const digits = [3, 4, 5, 6, 7, 8, 9]
    const said = new Map<number, { outcome: string | undefined; agentLines: string[] }>()
    for (const d of digits) {
      const run = await call(makeSimTelephony({ timeScale: 0 }), `+91987654321${d}`)
      said.set(d, {
        outcome: run.outcome,
        agentLines: run.turns.filter((t) => t.speaker === "agent").map((t) => t.text),
      })
    }
    const lines = [...new Set([...said.values()].flatMap((s) => s.agentLines.slice(1)))]
    expect(lines.length).toBeGreaterThan(10)
    const rules = lines.map((l) => ban(l.split(WHO.name).join("{name}")))
    for (const d of digits) {
      const asked: ReplyRequest[] = []
      const sim = makeSimLlm()
      const llm: LanguageModel = { ...sim, reply: (req) => (asked.push(req), sim.reply(req)) }
      const run = await call(makeSimTelephony({ timeScale: 0 }), `+91987654321${d}`, { llm, rules })
      const agent = run.turns.filter((t) => t.speaker === "agent").slice(1)
      expect(agent.length).toBeGreaterThan(0)
      for (const t of agent) expect(lines, `digit ${d}`).not.toContain(t.text)
      expect(run.outcome).not.toBe("agent_error")
      expect(asked.some((r) => r.avoid !== undefined)).toBe(false)
      expect(asked.every((r) => r.rules !== undefined && r.rules.banned.length === rules.length)).toBe(true)
    }
  })
})

// ---------------------------------------------------------------------------------------------

async function call(
  tel: TelephonyProvider,
  to: string,
  o: { llm?: LanguageModel; rules?: AgentRule[]; book?: RuleBook } = {},
): Promise<{ turns: ConversationTurn[]; outcome: string | undefined }> {
  const turns: ConversationTurn[] = []
  let answer!: (by: "human" | "machine" | null) => void
  const answered = new Promise<"human" | "machine" | null>((r) => (answer = r))
  const leg = tel.dial({ callId: 1, to, from: null, tenantId: 1 }, (e) => {
    if (e.type === "ANSWERED") answer(e.by)
    else if (e.type !== "RINGING") answer(null)
  })
  const by = await answered
  if (by === null) return { turns, outcome: undefined }
  const result = await converse({
    leg,
    llm: o.llm ?? makeSimLlm(),
    ruleBook: o.book ?? BOOK,
    callee: { name: WHO.name },
    agentName: WHO.agentName,
    company: WHO.company,
    rules: prepareCallRules(o.rules ?? [], WHO),
    answeredBy: by,
    onTurn: (t) => turns.push(t),
    requestApproval: async () => "approved",
    signal: new AbortController().signal,
  })
  return { turns, outcome: result.outcome }
}

describe("the opening line", () => {
  it("is an opening rule's when there is one, after the disclosures", async () => {
    const opening = rule({ bucket: "opening", body: "Hi {name}, {agent_name} here with a quick fibre offer." })
    const run = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { rules: [opening] })
    expect(run.turns[0]!.text).toBe(`${DISCLOSURE} Hi Asha, Priya here with a quick fibre offer.`)
    expect(run.outcome).toBe("agreed")
  })

  it("is left out when banned, but the disclosures are always spoken (on a voicemail too)", async () => {
    const banned = ban("Hello {name}, this is {agent_name} calling from {company}")
    const run = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { rules: [banned] })
    expect(run.turns[0]!.text).toBe(DISCLOSURE)
    expect(run.outcome).toBe("agreed")
    const both = [banned, rule({ bucket: "opening", body: "Hi {name}, quick one from {company}.", priority: 2 })]
    const withRule = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { rules: both })
    expect(withRule.turns[0]!.text).toBe(`${DISCLOSURE} Hi Asha, quick one from Acme Broadband.`)
    const voicemail = await call(makeSimTelephony({ timeScale: 0 }), "+919876543212", {
      book: VOICEMAIL_BOOK,
      rules: [ban(VOICEMAIL_BOOK.opening_line), ban(disclosures(VOICEMAIL_BOOK))],
    })
    expect(voicemail.outcome).toBe("voicemail_left")
    expect(voicemail.turns.map((t) => t.text).at(-1)).toBe(disclosures(VOICEMAIL_BOOK))
  })

  it("is left out when the whole first turn is banned (what a ban on a first turn learns)", async () => {
    const first = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", {})
    const whole = ban(first.turns[0]!.text.replace(/Asha/g, "{name}"))
    const run = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { rules: [whole] })
    expect(run.turns[0]!.text).toBe(DISCLOSURE)
    expect(run.outcome).toBe("agreed")
  })
})

describe("the conversation's guard, for a model that does not obey", () => {
  const BANNED = "Buy now, {name}, it's only today!"
  /** A model that answers each request with the next of `answers` (the last one repeated). */
  const scripted = (answers: AgentReply[]) => {
    const asked: ReplyRequest[] = []
    const llm: LanguageModel = {
      ...makeSimLlm(),
      reply: async (req) => {
        asked.push(req)
        return answers[Math.min(asked.length - 1, answers.length - 1)]!
      },
    }
    return { llm, asked }
  }

  it("asks again once, telling the model what not to say, and speaks its new line", async () => {
    const { llm, asked } = scripted([
      { text: "BUY NOW, Asha — it's only today!!" },
      { text: "Would you like the fibre plan, Asha?", end: { outcome: "agreed" } },
    ])
    const run = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { llm, rules: [ban(BANNED)] })
    expect(asked).toHaveLength(2)
    expect(asked[0]!.avoid).toBeUndefined()
    expect(asked[1]!.avoid).toEqual(["BUY NOW, Asha — it's only today!!"])
    expect(asked[1]!.history).toEqual(asked[0]!.history)
    expect(run.turns.map((t) => t.text).slice(2)).toEqual(["Would you like the fibre plan, Asha?"])
    expect(run.outcome).toBe("agreed")
  })

  it("speaks a neutral line, keeping the model's ending, when the model insists", async () => {
    const { llm, asked } = scripted([{ text: "Buy now, Asha, it's only today!", end: { outcome: "agreed" } }])
    const run = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { llm, rules: [ban(BANNED)] })
    expect(asked).toHaveLength(2)
    expect(run.turns.map((t) => t.text).slice(2)).toEqual([fillPlaceholders(NEUTRAL_LINES[0]!, WHO)])
    expect(run.outcome).toBe("agreed")
    for (const t of run.turns) expect(isBanned(t.text, prepareCallRules([ban(BANNED)], WHO))).toBe(false)
  })

  it("takes the next neutral line when the first is banned, and apologises when all are", async () => {
    const { llm } = scripted([
      { text: "Buy now, Asha, it's only today!" },
      { text: "Buy now, Asha, it's only today!", end: { outcome: "declined" } },
    ])
    const first = ban(NEUTRAL_LINES[0]!)
    const run = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { llm, rules: [ban(BANNED), first] })
    expect(run.turns[2]!.text).toBe(fillPlaceholders(NEUTRAL_LINES[1]!, WHO))
    expect(run.outcome).toBe("declined")

    const all = [ban(BANNED), ...NEUTRAL_LINES.map((l) => ban(l))]
    const stuck = scripted([{ text: "Buy now, Asha, it's only today!" }])
    const apology = await call(makeSimTelephony({ timeScale: 0 }), "+919876543213", { llm: stuck.llm, rules: all })
    expect(apology.outcome).toBe("agent_error")
    expect(apology.turns.at(-1)!.text).toContain("Acme Broadband will get back to you")
  })
})
