// A reply heard as the model writes it: the sentence cutter, the simulator's streamed reply (its
// first-token delay), and the conversation over a leg that speaks sentences as they come — the
// first sentence is on its way to the callee before the model has finished, a sentence saying a
// banned line is never spoken, and the turn recorded is what was said.
import { describe, expect, it } from "vitest"
import { converse } from "../../src/calls/conversation.js"
import { prepareCallRules } from "../../src/kb/rule-matching.js"
import type { AgentReply, LanguageModel, ReplyRequest } from "../../src/providers/llm/llm.interface.js"
import { makeSimLlm } from "../../src/providers/llm/sim.llm.js"
import { SentenceCutter, sentencesOf } from "../../src/providers/speech/sentences.js"
import type { CallLeg, Spoken } from "../../src/providers/telephony/telephony.interface.js"
import { simulatedBook } from "../support/rule-books.js"

const BOOK = simulatedBook()

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe("cutting a reply into sentences", () => {
  it("hands on each sentence once its end and the space after it have come, the rest at the end", () => {
    const out: string[] = []
    const cut = new SentenceCutter((s) => out.push(s))
    for (const piece of ["Hello Mr", ". Smith, the plan costs 3", ".5 euros", ". Is that", " ok? Great", "! Bye"]) {
      cut.push(piece)
    }
    expect(out).toEqual(["Hello Mr.", "Smith, the plan costs 3.5 euros.", "Is that ok?", "Great!"])
    cut.end()
    expect(out.at(-1)).toBe("Bye")
    expect(sentencesOf("One. Two?  Three!")).toEqual(["One.", "Two?", "Three!"])
  })
})

describe("the simulator's streamed reply", () => {
  it("writes the reply it would give whole, word by word, after its first-token delay", async () => {
    const llm = makeSimLlm({ firstTokenMs: 80, tokenMs: 2 })
    const req: ReplyRequest = {
      ruleBook: BOOK,
      history: [
        { speaker: "agent", text: BOOK.opening_line },
        { speaker: "callee", text: "Yes, I have a minute. What is it about?" },
      ],
      callee: { name: "Asha" },
      agentName: "Priya",
      company: "Acme",
    }
    const t0 = performance.now()
    let firstAt: number | undefined
    const pieces: string[] = []
    const reply = await llm.streamReply!(req, (p) => {
      firstAt ??= performance.now() - t0
      pieces.push(p)
    })
    expect(firstAt).toBeGreaterThanOrEqual(75)
    expect(pieces.length).toBeGreaterThan(3)
    expect(pieces.join("")).toBe(reply.text)
    expect(reply).toEqual(await llm.reply(req))
  })
})

/** A model that writes `text` in pieces, `gapMs` apart, then answers with `reply`. */
function writingModel(pieces: string[], gapMs: number, reply: Omit<AgentReply, "text"> = {}): LanguageModel {
  const sim = makeSimLlm()
  return {
    ...sim,
    async reply() {
      return { text: pieces.join(""), ...reply }
    },
    async streamReply(_req, onText) {
      for (const p of pieces) {
        await sleep(gapMs)
        onText(p)
      }
      return { text: pieces.join(""), ...reply }
    },
  }
}

/**
 * An audio-style leg: it reports what was played, says each streamed sentence when it arrives
 * (noting when), and has the callee say `lines` in turn.
 */
function audioLeg(lines: string[]) {
  const arrivals: Array<{ sentence: string; at: number }> = []
  const leg: CallLeg = {
    providerCallId: "CA-stream",
    reportsPlayed: true,
    async say(text: string): Promise<Spoken> {
      for (const sentence of sentencesOf(text)) arrivals.push({ sentence, at: performance.now() })
      return { durationMs: 10 }
    },
    async sayStreamed(sentences: AsyncIterable<string>): Promise<Spoken> {
      for await (const sentence of sentences) arrivals.push({ sentence, at: performance.now() })
      return { durationMs: 10 }
    },
    async listen() {
      const text = lines.shift()
      return text === undefined ? null : { text, at: Date.now() }
    },
    async hangup() {},
  }
  return { leg, arrivals }
}

/** The rules of a call that bans `line`. */
const banning = (line: string) =>
  prepareCallRules([{ id: 1, bucket: "banned_phrases", title: "no", body: line, trigger: null, priority: 0 }], {
    name: "Asha",
    agentName: "Priya",
    company: "Acme",
  })

/** A call where the callee says "Sure, go ahead." once: what the leg was given, and the turns. */
async function talk(llm: LanguageModel, rules?: ReturnType<typeof prepareCallRules>) {
  const { leg, arrivals } = audioLeg(["Sure, go ahead."])
  const turns: Array<{ speaker: string; text: string }> = []
  await converse({
    leg,
    llm,
    ruleBook: BOOK,
    ...(rules !== undefined && { rules }),
    callee: { name: "Asha" },
    agentName: "Priya",
    company: "Acme",
    onTurn: (t) => turns.push(t),
    requestApproval: async () => "timeout",
    signal: new AbortController().signal,
    maxTurns: 3,
  })
  return { said: arrivals.map((a) => a.sentence), arrivals, turns }
}

describe("a conversation heard as the model writes", () => {
  it("speaks the reply's first sentence before the model has written the rest", async () => {
    const pieces = ["Great, ", "thanks for your time. ", "The fibre ", "plan is ", "twice as fast. ", "Shall I go on?"]
    let modelDone = 0
    const llm = writingModel(pieces, 40)
    const streamReply = llm.streamReply!
    llm.streamReply = async (req, onText) => {
      const r = await streamReply(req, onText)
      modelDone = performance.now()
      return r
    }
    const { said, arrivals, turns } = await talk(llm)
    const first = arrivals.find((a) => a.sentence === "Great, thanks for your time.")
    expect(first).toBeDefined()
    // Four more pieces (160 ms) were still to be written when the first sentence went to the leg.
    expect(modelDone - first!.at).toBeGreaterThan(100)
    expect(said).toContain("Shall I go on?")
    expect(turns[2]).toMatchObject({
      speaker: "agent",
      text: "Great, thanks for your time. The fibre plan is twice as fast. Shall I go on?",
    })
  })

  it("never speaks a sentence that says a banned line; the turn is what was said", async () => {
    const { said, turns } = await talk(
      writingModel(["It is fast. ", "You get guaranteed savings. ", "Shall I go on?"], 5),
      banning("guaranteed savings"),
    )
    expect(said).toContain("It is fast.")
    expect(said.some((s) => /guaranteed savings/i.test(s))).toBe(false)
    expect(said).not.toContain("Shall I go on?")
    expect(turns[2]).toMatchObject({ speaker: "agent", text: "It is fast." })
  })

  it("asks again without streaming when the first sentence is banned, and speaks an allowed answer", async () => {
    const model = writingModel(["Trust me. ", "It is fast."], 5)
    let asked = 0
    model.reply = async (req) => {
      asked++
      return { text: req.avoid?.length ? "It is a fast plan." : "Trust me. It is fast." }
    }
    const { said, turns } = await talk(model, banning("trust me"))
    expect(asked).toBe(2)
    expect(said.some((s) => /trust me/i.test(s))).toBe(false)
    expect(turns[2]).toMatchObject({ speaker: "agent", text: "It is a fast plan." })
  })
})
