// The demo's pure parts: the masker (phone numbers and emails, written or spoken, masked; times,
// prices and counts left alone), the numbers a demo may call, the fixed rule book (valid for every
// demo persona), and the feed's events built from a call's rows (seqs stable and increasing).
import { describe, expect, it } from "vitest"
import { feedEvents, givenUpReason, TURNS_GRACE_MS } from "../../src/demo/demo.feed.js"
import { maskContactDetails } from "../../src/demo/demo.mask.js"
import type { DemoProgress, DemoTurn } from "../../src/demo/demo.repo.js"
import { DEMO_PERSONAS, defaultDemoPersona, demoRuleBook } from "../../src/demo/demo.rulebook.js"
import { demoNumber } from "../../src/demo/demo.service.js"
import { ValidationFailed } from "../../src/platform/errors.js"
import { validateRuleBook } from "../../src/workflows/rulebook.schema.js"

describe("maskContactDetails", () => {
  it.each([
    ["Call me on +1 202 555 0147 please", "Call me on +* *** *** **47 please"],
    ["my number is 9876543210.", "my number is ********10."],
    ["it's (415) 555-2671", "it's (***) ***-**71"],
    ["+91 98765-43210 or +44 20 7946 0958", "+** *****-***10 or +** ** **** **58"],
    ["write to jane.doe+demo@example.co.uk today", "write to j***@***.uk today"],
    ["Email SAM@Example.COM.", "Email S***@***.COM."],
    ["it's jane dot doe at gmail dot com", "it's *** at *** dot ***"],
    ["nine eight seven six five four three two one zero", "***"],
    ["double five, five one two three four", "***"],
  ])("%s", (input, masked) => {
    expect(maskContactDetails(input)).toBe(masked)
  })

  it.each([
    "Can I call you back at 10:30 tomorrow?",
    "That's $20 off, or ₹1,500 a month, for 12 months.",
    "Calling hours are 09:00–21:00.",
    "I have two minutes. One or two questions.",
    "Order A1234567 shipped.",
    "Look at this, it's great.",
  ])("leaves alone: %s", (line) => {
    expect(maskContactDetails(line)).toBe(line)
  })
})

describe("demoNumber", () => {
  it("gives E.164 and the country; a number without + is read as a US one", () => {
    expect(demoNumber("+91 98765 43210")).toEqual({ e164: "+919876543210", country: "IN" })
    expect(demoNumber("(202) 555-0103")).toEqual({ e164: "+12025550103", country: "US" })
  })

  it.each([
    ["12345", /valid phone number/],
    ["not a number", /valid phone number/],
    ["+49 30 901820", /only to numbers in/],
    ["+1 900 555 1234", /mobile or landline/],
    ["+1 800 555 1234", /mobile or landline/],
  ])("refuses %s with 422 on phone", (raw, says) => {
    const r = demoNumber(raw)
    expect(r).toBeInstanceOf(ValidationFailed)
    expect((r as ValidationFailed).errors[0]).toMatchObject({ field: "phone", message: expect.stringMatching(says) })
  })
})

describe("the demo rule book", () => {
  it.each(DEMO_PERSONAS)("is valid for %s, allows nothing that needs approval, and caps the call", (persona) => {
    const book = demoRuleBook(persona, "USD", 120)
    const checked = validateRuleBook(book, { currency: "USD", planTier: "free" })
    expect(checked.ok, JSON.stringify(checked)).toBe(true)
    expect(book).toMatchObject({
      persona,
      max_call_seconds: 120,
      ncpr_category: null,
      voicemail: "hang_up",
      concession_policy: { allowed: false },
      callback_policy: { allowed: false },
      escalation_policy: { allowed: false },
    })
  })

  it("speaks English only, in the number's country's voice by default", () => {
    expect(DEMO_PERSONAS).not.toContain("meera")
    expect(() => demoRuleBook("meera", "USD", 120)).toThrow()
    expect([defaultDemoPersona("IN"), defaultDemoPersona("US"), defaultDemoPersona("GB")]).toEqual([
      "priya",
      "anya",
      "amelia",
    ])
    expect(defaultDemoPersona("AE")).toBe("anya")
  })
})

describe("feedEvents", () => {
  const t0 = Date.parse("2025-03-01T10:00:00Z")
  const at = (s: number) => new Date(t0 + s * 1000)
  const call = { created_at: at(0) }
  const base: DemoProgress = {
    tenant_id: 1,
    run_status: "running",
    turn_seq: 0,
    run_target_id: 7,
    target_id: 8,
    target_status: "queued",
    attempts: 0,
    target_outcome: null,
    target_updated_at: at(0),
    call_id: null,
    call_status: null,
    call_outcome: null,
    started_at: null,
    answered_at: null,
    ended_at: null,
    turns_logged: null,
    hold_reason: null,
  }
  const turns: DemoTurn[] = [
    { seq: 1, speaker: "agent", text: "Hi Sam, this is Anya from Parley.", at: at(3) },
    { seq: 2, speaker: "callee", text: "Sure, reach me at sam@example.com or 202 555 0147.", at: at(5) },
  ]
  const dialling: DemoProgress = {
    ...base,
    target_status: "dialing",
    attempts: 1,
    call_id: 11,
    call_status: "dialing",
    started_at: at(1),
  }

  it("queued, then ringing, then answered and turns (masked), then ended one past the run's seqs", () => {
    expect(feedEvents(call, base, [], t0)).toEqual({
      events: [{ seq: 1, at: at(0).toISOString(), kind: "queued" }],
      done: false,
    })
    expect(feedEvents(call, dialling, [], t0).events.map((e) => e.kind)).toEqual(["queued", "ringing"])
    const talking = { ...dialling, call_status: "connected" as const, answered_at: at(2), turn_seq: 256 }
    const live = feedEvents(call, talking, turns, t0)
    expect(live.done).toBe(false)
    expect(live.events.map((e) => [e.seq, e.kind])).toEqual([
      [1, "queued"],
      [2, "ringing"],
      [3, "answered"],
      [4, "turn"],
      [5, "turn"],
    ])
    expect(live.events[4]).toMatchObject({ speaker: "callee", text: "Sure, reach me at s***@***.com or *** *** **47." })
    const ended = { ...talking, call_status: "ended" as const, call_outcome: "callee_hung_up", ended_at: at(9) }
    // The runtime logged two turns and both are stored: the end is final, after every seq the run reserved.
    const over = feedEvents(call, { ...ended, turns_logged: 2 }, turns, t0 + 10_000)
    expect(over.done).toBe(true)
    expect(over.events.at(-1)).toEqual({
      seq: 3 + 256 + 1,
      at: at(9).toISOString(),
      kind: "ended",
      text: "The call ended when you hung up.",
      outcome: "callee_hung_up",
    })
  })

  it("waits for the last turns to be stored before it says ended, for a grace period at most", () => {
    const ended: DemoProgress = {
      ...dialling,
      call_status: "ended",
      call_outcome: "agreed",
      answered_at: at(2),
      ended_at: at(9),
      turn_seq: 256,
      turns_logged: 3,
    }
    expect(feedEvents(call, ended, turns, at(9).getTime() + 100).done).toBe(false)
    expect(feedEvents(call, ended, turns, at(9).getTime() + TURNS_GRACE_MS).done).toBe(true)
  })

  it("holds a turn stored before the answer until the answer is recorded, so nothing shown changes", () => {
    const early = { ...dialling, call_status: "connected" as const, turn_seq: 256 }
    // The answer's row is written in a group just after the first turn: the turn waits for it.
    expect(feedEvents(call, early, turns.slice(0, 1), t0).events.map((e) => e.kind)).toEqual(["queued", "ringing"])
    const recorded = feedEvents(call, { ...early, answered_at: at(2) }, turns.slice(0, 1), t0).events
    expect(recorded[2]).toEqual({ seq: 3, at: at(2).toISOString(), kind: "answered" })
    expect(recorded[3]).toMatchObject({ kind: "turn" })
  })

  it("a target skipped by the dialer ends without ringing, with why", () => {
    const skipped: DemoProgress = {
      ...base,
      target_status: "skipped",
      target_outcome: "dnc_listed",
      target_updated_at: at(1),
    }
    const feed = feedEvents(call, skipped, [], t0)
    expect(feed.done).toBe(true)
    expect(feed.events.map((e) => [e.seq, e.kind, e.outcome])).toEqual([
      [1, "queued", undefined],
      [4, "ended", "dnc_listed"],
    ])
  })

  it("gives up a target held for the calling window at once, and a queued one after the timeout", () => {
    const created = at(0)
    expect(
      givenUpReason({ ...base, target_status: "waiting", hold_reason: "outside_calling_hours" }, created, t0),
    ).toBe("outside_calling_hours")
    expect(givenUpReason(base, created, t0 + 60_000)).toBeUndefined()
    expect(givenUpReason(base, created, t0 + 5 * 60_000)).toBe("demo_queue_timeout")
    expect(givenUpReason({ ...base, target_status: "waiting", attempts: 1 }, created, t0)).toBeUndefined()
  })
})
