// The rule-book schema: shape errors with dotted fields, each semantic rule with the field it
// names, every failure reported at once, the PUT merge, and the JSON Schema export.
import { describe, expect, it } from "vitest"
import { MAX_CONCESSION_MINOR, maxConcessionMinor } from "../../src/billing/pricing.js"
import {
  mergeRuleBook,
  type RuleBook,
  recordsCalls,
  repromptsOf,
  ruleBookJsonSchema,
  validateRuleBook,
} from "../../src/workflows/rulebook.schema.js"

const INR = { currency: "INR", planTier: "free" } as const
const USD = { currency: "USD", planTier: "free" } as const

function validBook(): RuleBook {
  return {
    schema_version: 1,
    name: "Broadband upgrade",
    goal: "Offer existing customers the faster broadband plan.",
    language: "en-IN",
    persona: "priya",
    system_prompt: "You are {agent_name} from {company}, calling {name} about a faster plan.",
    opening_line: "Hello {name}, this is {agent_name} from {company}. Do you have a minute?",
    disclosure_lines: ["This call is from {company} and may be recorded for quality."],
    objection_handlers: [
      {
        objection_id: 1,
        category: "price",
        trigger: "It's too expensive.",
        response: "I understand, {name}. The plan costs less per GB.",
      },
      {
        objection_id: null,
        category: "timing",
        trigger: "I'm busy right now.",
        response: "Of course, when shall I call back?",
      },
    ],
    concession_policy: { allowed: true, cap_minor: 50_000, currency: "INR", requires_approval: true },
    callback_policy: { allowed: true, max_days_ahead: 7, requires_approval: true },
    escalation_policy: { allowed: true, triggers: ["The callee asks for a human"], requires_approval: true },
    voicemail: "hang_up",
    max_call_seconds: 300,
    ncpr_category: 6,
  }
}

/** The book with `change` applied to a deep copy. */
function withChange(change: (b: RuleBook) => void): RuleBook {
  const b = structuredClone(validBook())
  change(b)
  return b
}

function errorsOf(input: unknown, ctx: { currency: "INR" | "USD"; planTier: string } = INR) {
  const result = validateRuleBook(input, ctx)
  expect(result.ok).toBe(false)
  return result.ok ? [] : result.errors
}

const fields = (errors: Array<{ field: string }>): string[] => errors.map((e) => e.field)

describe("RuleBook shape", () => {
  it("accepts a valid book and strips unknown keys at every level", () => {
    const input = { ...validBook(), extra: "x", concession_policy: { ...validBook().concession_policy, note: "y" } }
    const result = validateRuleBook(input, INR)
    expect(result.ok).toBe(true)
    if (!result.ok) return
    expect(result.value).toEqual(validBook())
    expect("extra" in result.value).toBe(false)
    expect("note" in result.value.concession_policy).toBe(false)
  })

  it("names shape errors by dotted path", () => {
    const errors = errorsOf(
      withChange((b) => {
        b.concession_policy.cap_minor = -1
        b.objection_handlers[0]!.trigger = ""
      }),
    )
    expect(fields(errors).sort()).toEqual(["concession_policy.cap_minor", "objection_handlers.0.trigger"])
  })

  it("refuses wrong versions, unknown personas and languages, out-of-range numbers", () => {
    const errors = errorsOf({
      ...validBook(),
      schema_version: 2,
      persona: "zed",
      language: "fr-FR",
      max_call_seconds: 10,
      ncpr_category: 9,
    })
    expect(fields(errors).sort()).toEqual([
      "language",
      "max_call_seconds",
      "ncpr_category",
      "persona",
      "schema_version",
    ])
  })

  it("refuses a missing key and a non-object", () => {
    const { goal: _goal, ...noGoal } = validBook()
    expect(fields(errorsOf(noGoal))).toEqual(["goal"])
    expect(fields(errorsOf("a rule book"))).toEqual(["rule_book"])
  })

  it("takes a listening section for calls heard as audio: in range, the goodbye not before the reprompt", () => {
    const listening = { end_of_speech_ms: 700, reprompt_after_seconds: 5, goodbye_after_seconds: 15 }
    const ok = validateRuleBook({ ...validBook(), listening }, INR)
    expect(ok.ok && ok.value.listening).toEqual(listening)
    expect(repromptsOf(listening)).toBe(2)
    expect(repromptsOf({ ...listening, goodbye_after_seconds: 5 })).toBe(0)
    expect(repromptsOf(undefined)).toBe(2) // 7 s, then goodbye at 21 s
    const bad = { end_of_speech_ms: 50, reprompt_after_seconds: 10, goodbye_after_seconds: 4 }
    expect(fields(errorsOf({ ...validBook(), listening: bad })).sort()).toEqual(["listening.end_of_speech_ms"])
    const early = { ...listening, goodbye_after_seconds: 4 }
    expect(fields(errorsOf({ ...validBook(), listening: early }))).toEqual(["listening.goodbye_after_seconds"])
  })

  it("records calls the disclosures say are recorded, unless recording is turned off", () => {
    const book = validBook()
    expect(recordsCalls(book)).toBe(true) // "may be recorded for quality", recording absent
    expect(recordsCalls({ ...book, recording: false })).toBe(false)
    const undisclosed = { ...book, disclosure_lines: ["This call is from {company}."] }
    expect(recordsCalls(undisclosed)).toBe(false)
    expect(recordsCalls({ ...book, disclosure_lines: ["Yeh call record ki ja sakti hai."] })).toBe(true)
    // Asking for recording without telling the callee is refused, with the field.
    expect(fields(errorsOf({ ...undisclosed, recording: true }))).toEqual(["recording"])
    expect(validateRuleBook({ ...undisclosed, recording: false }, INR).ok).toBe(true)
    expect(Object.keys((ruleBookJsonSchema().properties ?? {}) as object)).not.toContain("recording")
  })

  it("accepts ncpr_category and objection_id null", () => {
    expect(validateRuleBook({ ...validBook(), ncpr_category: null }, INR).ok).toBe(true)
  })
})

describe("RuleBook semantic checks", () => {
  it("needs a disclosure line", () => {
    expect(fields(errorsOf(withChange((b) => void (b.disclosure_lines = []))))).toEqual(["disclosure_lines"])
  })

  it("needs an objection handler", () => {
    expect(fields(errorsOf(withChange((b) => void (b.objection_handlers = []))))).toEqual(["objection_handlers"])
  })

  it("refuses triggers that repeat ignoring case and surrounding space", () => {
    const errors = errorsOf(withChange((b) => void (b.objection_handlers[1]!.trigger = "  it's TOO expensive. ")))
    expect(fields(errors)).toEqual(["objection_handlers.1.trigger"])
    expect(errors[0]!.message).toContain("objection_handlers.0")
  })

  it("needs a positive concession cap when concessions are allowed, and none when not", () => {
    expect(fields(errorsOf(withChange((b) => void (b.concession_policy.cap_minor = 0))))).toEqual([
      "concession_policy.cap_minor",
    ])
    const off = withChange(
      (b) => void (b.concession_policy = { allowed: false, cap_minor: 0, currency: "INR", requires_approval: true }),
    )
    expect(validateRuleBook(off, INR).ok).toBe(true)
  })

  it("caps the concession at the plan's ceiling in the workspace currency", () => {
    expect(maxConcessionMinor("INR", "free")).toBe(MAX_CONCESSION_MINOR.INR)
    expect(MAX_CONCESSION_MINOR).toEqual({ INR: 500_000, USD: 10_000 })
    expect(
      validateRuleBook(
        withChange((b) => void (b.concession_policy.cap_minor = 500_000)),
        INR,
      ).ok,
    ).toBe(true)
    const over = errorsOf(withChange((b) => void (b.concession_policy.cap_minor = 500_001)))
    expect(fields(over)).toEqual(["concession_policy.cap_minor"])
    expect(over[0]!.message).toContain("500000")
    const usd = withChange(
      (b) =>
        void (b.concession_policy = { allowed: true, cap_minor: 10_001, currency: "USD", requires_approval: true }),
    )
    expect(fields(errorsOf(usd, USD))).toEqual(["concession_policy.cap_minor"])
  })

  it("needs the concession currency to be the workspace's", () => {
    expect(fields(errorsOf(validBook(), USD))).toEqual(["concession_policy.currency"])
  })

  it("needs the persona to speak the book's language family", () => {
    const hindiPersona = errorsOf(withChange((b) => void (b.persona = "meera")))
    expect(fields(hindiPersona)).toEqual(["persona"])
    expect(hindiPersona[0]!.message).toContain("hi-IN")
    expect(fields(errorsOf(withChange((b) => void (b.language = "hi-IN"))))).toEqual(["persona"])
    // Same family, another accent: allowed.
    expect(
      validateRuleBook(
        withChange((b) => void (b.language = "en-US")),
        INR,
      ).ok,
    ).toBe(true)
    expect(
      validateRuleBook(
        withChange((b) => ((b.language = "hi-IN"), (b.persona = "meera"))),
        INR,
      ).ok,
    ).toBe(true)
  })

  it("allows only {name}, {agent_name} and {company}, naming the placeholder", () => {
    const errors = errorsOf(
      withChange((b) => {
        b.opening_line = "Hello {name}, about {offer}."
        b.system_prompt = "Call {first_name} about {offer} and {offer}."
        b.objection_handlers[1]!.response = "Would {callback_window} work?"
      }),
    )
    expect(fields(errors)).toEqual(["opening_line", "system_prompt", "objection_handlers.1.response"])
    expect(errors[0]!.message).toContain("{offer}")
    expect(errors[1]!.message).toContain("{first_name}, {offer}")
    expect(errors[1]!.message).not.toContain("{offer}, {offer}")
    expect(errors[2]!.message).toContain("{callback_window}")
  })

  it("needs an escalation trigger when escalation is allowed", () => {
    expect(fields(errorsOf(withChange((b) => void (b.escalation_policy.triggers = []))))).toEqual([
      "escalation_policy.triggers",
    ])
    const off = withChange(
      (b) => void (b.escalation_policy = { allowed: false, triggers: [], requires_approval: true }),
    )
    expect(validateRuleBook(off, INR).ok).toBe(true)
  })

  it("reports every semantic failure at once", () => {
    const errors = errorsOf(
      withChange((b) => {
        b.disclosure_lines = []
        b.objection_handlers = []
        b.concession_policy = { allowed: true, cap_minor: 0, currency: "USD", requires_approval: true }
        b.persona = "meera"
        b.opening_line = "Hi {nickname}"
        b.escalation_policy.triggers = []
      }),
    )
    expect(fields(errors).sort()).toEqual(
      [
        "concession_policy.cap_minor",
        "concession_policy.currency",
        "disclosure_lines",
        "escalation_policy.triggers",
        "objection_handlers",
        "opening_line",
        "persona",
      ].sort(),
    )
  })
})

describe("mergeRuleBook", () => {
  it("replaces top-level keys and merges the policies one level deep", () => {
    const current = validBook()
    const merged = mergeRuleBook(current, {
      name: "Renamed",
      disclosure_lines: ["Recorded call from {company}."],
      concession_policy: { cap_minor: 1000 },
      callback_policy: { allowed: false },
    }) as RuleBook
    expect(merged.name).toBe("Renamed")
    expect(merged.disclosure_lines).toEqual(["Recorded call from {company}."])
    expect(merged.concession_policy).toEqual({ ...current.concession_policy, cap_minor: 1000 })
    expect(merged.callback_policy).toEqual({ ...current.callback_policy, allowed: false })
    expect(merged.escalation_policy).toEqual(current.escalation_policy)
    expect(validateRuleBook(merged, INR).ok).toBe(true)
    // The current book is left as it was.
    expect(current).toEqual(validBook())
  })

  it("replaces arrays whole and ignores undefined values", () => {
    const merged = mergeRuleBook(validBook(), {
      objection_handlers: [validBook().objection_handlers[1]],
      goal: undefined,
    }) as RuleBook
    expect(merged.objection_handlers).toHaveLength(1)
    expect(merged.goal).toBe(validBook().goal)
  })

  it("lets validation report a policy replaced by a non-object, and a bad merged value", () => {
    expect(fields(errorsOf(mergeRuleBook(validBook(), { concession_policy: null })))).toEqual(["concession_policy"])
    expect(fields(errorsOf(mergeRuleBook(validBook(), { concession_policy: { cap_minor: 10_000_000 } })))).toEqual([
      "concession_policy.cap_minor",
    ])
  })
})

describe("ruleBookJsonSchema", () => {
  it("describes every key as required", () => {
    const schema = ruleBookJsonSchema()
    expect(schema.type).toBe("object")
    expect(Object.keys(schema.properties as object).sort()).toEqual(Object.keys(validBook()).sort())
    expect((schema.required as string[]).sort()).toEqual(Object.keys(validBook()).sort())
  })
})
