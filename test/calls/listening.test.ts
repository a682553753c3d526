// A silent callee, by the workflow's listening settings: asked again as often as the reprompt window
// fits into the goodbye window (two by default), then told goodbye, and the call ends undecided.
import { describe, expect, it } from "vitest"
import { converse } from "../../src/calls/conversation.js"
import { makeSimLlm } from "../../src/providers/llm/sim.llm.js"
import type { CallLeg } from "../../src/providers/telephony/telephony.interface.js"
import type { RuleBook } from "../../src/workflows/rulebook.schema.js"
import { simulatedBook } from "../support/rule-books.js"

const book = (listening?: RuleBook["listening"]): RuleBook =>
  simulatedBook(listening === undefined ? {} : { listening })

/** A callee who never says anything (an audio leg's listen() answers "" after its silence window). */
const silentLeg = (): CallLeg => ({
  providerCallId: "CA-silent",
  say: async () => ({ durationMs: 10 }),
  listen: async () => ({ text: "", at: Date.now() }),
  hangup: async () => {},
})

async function silentCall(ruleBook: RuleBook) {
  const said: string[] = []
  const result = await converse({
    leg: silentLeg(),
    llm: makeSimLlm(),
    ruleBook,
    callee: { name: "Asha" },
    agentName: "Priya",
    company: "Acme",
    onTurn: (t) => said.push(t.text),
    requestApproval: async () => "timeout",
    signal: new AbortController().signal,
  })
  return { result, reprompts: said.filter((t) => t.startsWith("Sorry, I didn't catch that")).length, said }
}

describe("a silent callee", () => {
  it("is asked again twice by default, then told goodbye", async () => {
    const { result, reprompts, said } = await silentCall(book())
    expect(reprompts).toBe(2)
    expect(said.at(-1)).toMatch(/can't hear you.*Goodbye/)
    expect(result.outcome).toBe("no_decision")
  })

  it("is asked again as the workflow's listening settings say", async () => {
    const once = await silentCall(book({ end_of_speech_ms: 500, reprompt_after_seconds: 5, goodbye_after_seconds: 10 }))
    expect(once.reprompts).toBe(1)
    const never = await silentCall(book({ end_of_speech_ms: 500, reprompt_after_seconds: 5, goodbye_after_seconds: 5 }))
    expect(never.reprompts).toBe(0)
    expect(never.said.at(-1)).toMatch(/Goodbye/)
    const patient = await silentCall(
      book({ end_of_speech_ms: 500, reprompt_after_seconds: 3, goodbye_after_seconds: 15 }),
    )
    expect(patient.reprompts).toBe(4)
  })
})
