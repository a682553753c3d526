// The analysis simulator for each sim callee behaviour (exact values), its field rules by type, and
// the zod check of a model's answer (clipped summary, typed fields, nulls, unknown fields refused).
import { describe, expect, it } from "vitest"
import { type AnalysisField, analysisAnswerSchema, clipSummary } from "../../src/analysis/analysis.schema.js"
import { type CallForAnalysis, simulateAnalysis } from "../../src/analysis/analysis.sim.js"

const ENDED = new Date("2026-03-10T15:00:00Z")
const FIELDS: AnalysisField[] = [
  { name: "interested", type: "boolean", description: "d" },
  { name: "budget", type: "number", description: "d" },
  { name: "stage", type: "enum", description: "d", enum: ["hot", "negative", "escalated"] },
  { name: "callback_day", type: "date", description: "d" },
  { name: "phone", type: "phone", description: "d" },
  { name: "email", type: "email", description: "d" },
  { name: "first_name", type: "string", description: "d" },
  { name: "objection", type: "string", description: "d" },
]

const callOf = (phone: string, outcome: string, callee: string[], name: string | null = null): CallForAnalysis => ({
  phone,
  calleeName: name,
  outcome,
  connectedSeconds: 30,
  endedAt: ENDED,
  transcript: callee.flatMap((text) => [
    { speaker: "agent", text: "Hello, can I tell you about our plan?" },
    { speaker: "callee", text },
  ]),
})

describe("simulateAnalysis", () => {
  it.each([
    [
      "voicemail (2)",
      callOf("+12025550102", "voicemail", ["Hi, you've reached my voicemail. Please leave a message after the tone."]),
      { summary: "The callee reached voicemail and did not talk to the agent.", goal_met: false, sentiment: "neutral" },
    ],
    [
      "agrees (4)",
      callOf("+12025550104", "agreed", ["Sure, go ahead.", "Yes, that sounds good. Let's go ahead."], "Ravi"),
      { summary: "Ravi was interested and agreed to go ahead.", goal_met: true, sentiment: "positive" },
    ],
    [
      "declines (6)",
      callOf("+12025550106", "declined", ["Honestly, I don't really need this.", "No thanks, I'm not interested."]),
      {
        summary: "The callee objected that they did not need the offer and declined.",
        goal_met: false,
        sentiment: "negative",
      },
    ],
    [
      "wants a discount, refused (7)",
      callOf("+12025550107", "declined", ["Could you do a discount?", "Then I'll pass, thanks."]),
      { summary: "The callee asked for a discount and declined.", goal_met: false, sentiment: "negative" },
    ],
    [
      "wants a callback (8)",
      callOf("+12025550108", "callback_scheduled", ["Can you call me back tomorrow?", "Okay, I'll hold."]),
      {
        summary: "The callee asked to be called back tomorrow and was promised a callback.",
        goal_met: false,
        sentiment: "neutral",
      },
    ],
    [
      "wants a human (9)",
      callOf("+12025550109", "escalated", ["I want to speak to a human, please.", "Alright."]),
      {
        summary: "The callee asked to speak to a human and was handed to a colleague.",
        goal_met: false,
        sentiment: "neutral",
      },
    ],
  ])("%s", (_, call, expected) => {
    const a = simulateAnalysis(call, [])
    expect(a).toEqual({ ...expected, fields: {} })
  })

  it("derives each field type from the transcript", () => {
    const call = callOf(
      "+12025550108",
      "callback_scheduled",
      ["I spend 1,200 a month; it's too expensive.", "Call me back tomorrow at ravi@example.com, hot lead!"],
      "Ravi",
    )
    expect(simulateAnalysis(call, FIELDS).fields).toEqual({
      interested: false,
      budget: 1200,
      stage: "hot",
      callback_day: "2026-03-11",
      phone: "+12025550108",
      email: "ravi@example.com",
      first_name: "Ravi",
      objection: "I spend 1,200 a month; it's too expensive.",
    })
    // Nothing said: nulls, the enum by sentiment, the dialed number.
    expect(simulateAnalysis(callOf("+12025550106", "declined", ["No."]), FIELDS).fields).toEqual({
      interested: false,
      budget: null,
      stage: "negative",
      callback_day: null,
      phone: "+12025550106",
      email: null,
      first_name: null,
      objection: "No.",
    })
  })
})

describe("the answer check", () => {
  const schema = analysisAnswerSchema(FIELDS)
  const valid = {
    summary: "ok",
    goal_met: true,
    sentiment: "neutral",
    fields: {
      interested: null,
      budget: 10.5,
      stage: "hot",
      callback_day: "2026-02-28",
      phone: "+1 (202) 555-0108",
      email: null,
      first_name: "A",
      objection: null,
    },
  }

  it("accepts typed values and nulls, normalising a phone number", () => {
    const r = schema.safeParse(valid)
    expect(r.success).toBe(true)
    expect(r.data?.fields.phone).toBe("+12025550108")
  })

  it.each([
    ["a wrong type", { budget: "ten" }],
    ["an unknown enum value", { stage: "warm" }],
    ["an impossible date", { callback_day: "2026-02-30" }],
    ["a bad email", { email: "nope" }],
    ["a field not asked for", { extra: 1 }],
  ])("refuses %s", (_, change) => {
    expect(schema.safeParse({ ...valid, fields: { ...valid.fields, ...change } }).success).toBe(false)
  })

  it("clips a long summary at a word, within 400 characters", () => {
    const long = "word ".repeat(200)
    const clipped = clipSummary(long)
    expect(clipped.length).toBeLessThanOrEqual(400)
    expect(clipped.endsWith("word…")).toBe(true)
    expect(schema.parse({ ...valid, summary: long }).summary).toBe(clipped)
  })
})
