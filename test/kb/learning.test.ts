// The learning policy: its pure parts (de-filling a line, finding its objection handler, the
// decision per verdict), then each branch through the server — a ban's active rule, punishes'
// paused proposal, rewards' weighted answer, repeats linked instead of duplicated, a replaced
// verdict unlinked, each reviewer's latest verdict on a line the only one counted — and once on a
// real simulated run, whose rule book and names the policy reads.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuleRow } from "../../src/kb/kb.repo.js"
import { categoryToken, defill, handlerOf, type LearnInput, learn, lineKey } from "../../src/kb/learning.js"
import { fillPlaceholders } from "../../src/providers/llm/llm.interface.js"
import { findVoice } from "../../src/voices/voices.catalog.js"
import { FAST_RUNTIME_ENV, type Session, SYSTEM_KEY } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { type Campaign, type Json, kbClient } from "./feedback.support.js"

const vars = { name: "Asha", agentName: "Alex", company: "Acme Alex Ltd" }

describe("the policy's pure parts", () => {
  it("puts the call's placeholders back, whole words only, longest first", () => {
    expect(defill("Hi Asha, this is Alex from Acme Alex Ltd. ASHA?", vars)).toBe(
      "Hi {name}, this is {agent_name} from {company}. {name}?",
    )
    expect(defill("Ashanti and Alexa stay", vars)).toBe("Ashanti and Alexa stay")
    expect(defill("Hello there.", { name: null, agentName: "Alex", company: "Acme" })).toBe("Hello there.")
    expect(lineKey("Great — ONLY ₹499, {name}!")).toBe("great only ₹499 name")
  })

  it("turns a rule book's category into a trigger category", () => {
    expect(categoryToken("Not Interested")).toBe("not_interested")
    expect(categoryToken("price")).toBe("price")
    expect(categoryToken("!!!")).toBeNull()
  })

  it("finds the handler by its response first, else by the callee's words", () => {
    const handlers = [
      { category: "price", trigger: "It's too expensive for me.", response: "We have a plan for every budget." },
      { category: "timing", trigger: "I'm busy right now.", response: "I'll be quick, {name}." },
    ]
    expect(handlerOf(handlers, lineKey("I'll be quick, {name}."), vars, null)?.category).toBe("timing")
    expect(handlerOf(handlers, "something else", vars, "It is really expensive")?.category).toBe("price")
    expect(handlerOf(handlers, "something else", vars, "Hello?")).toBeUndefined()
    expect(handlerOf(handlers, "something else", vars, null)).toBeUndefined()
    // A response cut short by the callee: the one handler whose response it begins.
    expect(handlerOf(handlers, lineKey("We have a plan"), vars, null)?.category).toBe("price")
    const both = [...handlers, { category: "need", trigger: "No need.", response: "We have a plan for you." }]
    expect(handlerOf(both, lineKey("We have a plan"), vars, null)).toBeUndefined()
  })

  const base: LearnInput = {
    verdict: "punish",
    feedbackId: 9,
    workflowId: 3,
    line: "Buy now, {name}!",
    key: "buy now name",
    handler: { category: "price", response: "We have a plan for every budget." },
    peers: [],
    existing: undefined,
  }
  const rule = { id: 40, priority: 100 } as RuleRow

  it("decides per verdict", () => {
    expect(learn({ ...base, peers: [{ id: 9, verdict: "punish", note: null }] })).toEqual({ kind: "nothing" })
    const punished = learn({
      ...base,
      peers: [
        { id: 9, verdict: "punish", note: "" },
        { id: 8, verdict: "punish", note: "Offer the yearly plan." },
        { id: 7, verdict: "punish", note: "older note" },
      ],
    })
    expect(punished).toMatchObject({
      kind: "create",
      rule: { status: "paused", bucket: "objection.price", body: "Offer the yearly plan.", priority: 0 },
      feedbackIds: [9, 8, 7],
    })
    const noNote = learn({
      ...base,
      handler: undefined,
      peers: [
        { id: 9, verdict: "punish", note: null },
        { id: 8, verdict: "punish", note: null },
      ],
    })
    expect(noNote).toMatchObject({
      rule: { bucket: "review", trigger: null, body: "Rephrase instead of saying: “Buy now, {name}!”" },
    })
    // At the cap a reward links without raising.
    expect(learn({ ...base, verdict: "reward", existing: rule })).toEqual({ kind: "link", ruleId: 40 })
    expect(learn({ ...base, verdict: "ban", existing: rule })).toEqual({ kind: "link", ruleId: 40 })
    // A reward rule rises to the count of standing rewards: a repeat (the count unchanged) raises nothing.
    const two = { ...rule, priority: 2 }
    const standing = (n: number) =>
      Array.from({ length: n }, (_, j) => ({ id: 9 - j, verdict: "reward" as const, note: null }))
    expect(learn({ ...base, verdict: "reward", existing: two, peers: standing(2) })).toEqual({
      kind: "link",
      ruleId: 40,
    })
    expect(learn({ ...base, verdict: "reward", existing: two, peers: standing(3) })).toEqual({
      kind: "link",
      ruleId: 40,
      priority: 3,
    })
    const rewards = [
      { id: 9, verdict: "reward", note: null },
      { id: 8, verdict: "reward", note: null },
    ] as const
    expect(learn({ ...base, verdict: "reward", peers: rewards })).toMatchObject({
      kind: "create",
      rule: { status: "active", bucket: "objection.price", trigger: { phrases: [], category: "price" }, priority: 2 },
    })
    // No category, or as many punishes: no rule.
    expect(learn({ ...base, verdict: "reward", peers: rewards, handler: undefined })).toEqual({ kind: "nothing" })
    const tied = [...rewards, { id: 5, verdict: "punish", note: null }, { id: 4, verdict: "punish", note: null }]
    expect(learn({ ...base, verdict: "reward", peers: tied as LearnInput["peers"] })).toEqual({ kind: "nothing" })
  })
})

let srv: TestServer
let k: ReturnType<typeof kbClient>
let owner: Session
let keys: string[]

beforeAll(async () => {
  srv = await sharedTestServer({ env: { ...FAST_RUNTIME_ENV, SYSTEM_KEY } })
  k = kbClient(srv)
  owner = await k.a.signup({ country: "US" })
  keys = await k.reviewers(owner, 3)
})
afterAll(async () => srv?.stop())

const rulesOf = (workflowId: number) =>
  srv.sql<Array<Json>>`
    select id, bucket, title, body, trigger, priority, status, source_kind, learnt_kind, learnt_line
    from kb_rules where workflow_id = ${workflowId} order by id`
const linksOf = async (ruleId: number) =>
  (
    await srv.sql<Array<{ feedback_id: number }>>`
      select feedback_id from kb_rule_feedback where rule_id = ${ruleId} order by feedback_id`
  ).map((r) => r.feedback_id)
const getRule = async (id: number) => (await k.call("GET", `/kb/rules/${id}`, owner.token)).body

describe("learning through the server", () => {
  let c: Campaign
  beforeAll(async () => {
    c = await k.campaign(owner)
  })

  it("a ban makes an active banned_phrases rule at once; further bans of the line link to it", async () => {
    const t1 = await k.turn(c, "Asha Rao", "agent", c.fill("We're the cheapest, {name}, promise!", "Asha Rao"))
    const first = await k.give(owner.token, t1, "ban")
    expect(first.status).toBe(201)
    const rules = await rulesOf(c.workflowId)
    expect(rules).toEqual([
      {
        id: expect.any(Number),
        bucket: "banned_phrases",
        title: "Never say “We're the cheapest, {name}, promise!”",
        body: "We're the cheapest, {name}, promise!",
        trigger: null,
        priority: 100,
        status: "active",
        source_kind: "feedback",
        learnt_kind: "ban",
        learnt_line: "we're the cheapest name promise",
      },
    ])
    const ruleId = rules[0]!.id as number
    expect(first.body.rule_ids).toEqual([ruleId])
    expect(await getRule(ruleId)).toMatchObject({ source_kind: "feedback", feedback_ids: [first.body.id] })

    // The same line to another callee, by another reviewer; and the same reviewer again.
    const t2 = await k.turn(c, "Ben", "agent", c.fill("We're the cheapest, {name}, promise!", "Ben"))
    const second = await k.give(keys[0]!, t2, "ban")
    expect(second.body.rule_ids).toEqual([ruleId])
    const third = await k.give(owner.token, t1, "ban")
    expect(third.status).toBe(201)
    expect(await rulesOf(c.workflowId)).toHaveLength(1)
    // The rule links each reviewer's standing ban: the owner's repeat took the place of the first.
    expect(await linksOf(ruleId)).toEqual([second.body.id, third.body.id])
    const events = await srv.sql<Array<{ action: string }>>`
      select action from kb_events where workflow_id = ${c.workflowId} order by id`
    expect(events.map((e) => e.action)).toEqual(["feedback_given", "rule_learnt", "feedback_given", "feedback_given"])
  })

  it("concurrent bans of one line by several reviewers make one rule that links them all", async () => {
    const d = await k.campaign(owner)
    const t = await k.turn(d, "Ben", "agent", "Trust me, this never fails.")
    const given = await Promise.all([owner.token, ...keys].map((token) => k.give(token, t, "ban")))
    expect(given.map((g) => g.status)).toEqual([201, 201, 201, 201])
    const rules = await rulesOf(d.workflowId)
    expect(rules).toHaveLength(1)
    expect(await linksOf(rules[0]!.id as number)).toEqual(given.map((g) => g.body.id as number).sort((x, y) => x - y))
  })

  it("two punishes propose a paused rule with the newest note; a third links to it", async () => {
    const d = await k.campaign(owner)
    const handler = d.handlers.find((h) => h.category === "not_interested") ?? d.handlers[0]!
    const said = "Are you absolutely sure, {name}? Think about it."
    const turns = []
    for (const name of ["Asha Rao", "Ben", "Asha Rao"]) {
      await k.turn(d, name, "callee", handler.trigger)
      turns.push(await k.turn(d, name, "agent", d.fill(said, name)))
    }
    const p1 = await k.give(owner.token, turns[0], "punish", "Thank them and let them go.")
    expect(p1.body.rule_ids).toEqual([])
    expect(await rulesOf(d.workflowId)).toEqual([])
    const p2 = await k.give(keys[0]!, turns[1], "punish")
    const rules = await rulesOf(d.workflowId)
    expect(rules).toEqual([
      expect.objectContaining({
        bucket: `objection.${categoryToken(handler.category)}`,
        title: `Say something else than “${said}”`,
        body: "Thank them and let them go.",
        trigger: { phrases: [], category: categoryToken(handler.category) },
        status: "paused",
        learnt_kind: "punish",
      }),
    ])
    const ruleId = rules[0]!.id as number
    expect(p2.body.rule_ids).toEqual([ruleId])
    expect(await linksOf(ruleId)).toEqual([p1.body.id, p2.body.id])
    const p3 = await k.give(keys[1]!, turns[2], "punish", "Something else entirely.")
    expect(p3.body.rule_ids).toEqual([ruleId])
    expect(await rulesOf(d.workflowId)).toHaveLength(1)
    expect((await getRule(ruleId)).body).toBe("Thank them and let them go.")
  })

  it("punishes of a line of no known category propose a rule in `review` that quotes the line", async () => {
    const d = await k.campaign(owner)
    const t = await k.turn(d, "Ben", "agent", "Zzz qqq xyzzy.")
    await k.give(owner.token, t, "punish")
    await k.give(keys[0]!, t, "punish", "   ")
    expect(await rulesOf(d.workflowId)).toEqual([
      expect.objectContaining({
        bucket: "review",
        trigger: null,
        status: "paused",
        body: "Rephrase instead of saying: “Zzz qqq xyzzy.”",
      }),
    ])
  })

  it("rewards make the line its objection's answer, weighted by count; each further reward raises it", async () => {
    const d = await k.campaign(owner)
    const handler = d.handlers[0]!
    const category = categoryToken(handler.category)!
    const said = "No problem at all, {name}; we can talk whenever suits you."
    const t = []
    for (const name of ["Asha Rao", "Ben"]) {
      await k.turn(d, name, "callee", handler.trigger)
      t.push(await k.turn(d, name, "agent", d.fill(said, name)))
    }
    expect((await k.give(owner.token, t[0], "reward")).body.rule_ids).toEqual([])
    // One punish and one reward: rewards do not outnumber punishes yet.
    await k.give(keys[0]!, t[1], "punish")
    expect(await rulesOf(d.workflowId)).toEqual([])
    // The punisher changes their mind: 2 rewards, 0 punishes.
    const r2 = await k.give(keys[0]!, t[1], "reward")
    expect(r2.status).toBe(201)
    const [rule] = await rulesOf(d.workflowId)
    expect(rule).toMatchObject({
      bucket: `objection.${category}`,
      body: said,
      trigger: { phrases: [], category },
      priority: 2,
      status: "active",
      learnt_kind: "reward",
    })
    expect(r2.body.rule_ids).toEqual([rule!.id])
    const r3 = await k.give(keys[1]!, t[0], "reward")
    expect(r3.body.rule_ids).toEqual([rule!.id])
    expect((await getRule(rule!.id)).priority).toBe(3)
    // A reviewer repeating their reward raises nothing.
    expect((await k.give(keys[1]!, t[0], "reward")).status).toBe(201)
    expect((await getRule(rule!.id)).priority).toBe(3)
    expect(await linksOf(rule!.id)).toHaveLength(3)
  })

  it("a replaced verdict is unlinked from the rule of its old kind, which stays", async () => {
    const d = await k.campaign(owner)
    const t = await k.turn(d, "Ben", "agent", "Sign up today or lose out forever.")
    const ban = await k.give(owner.token, t, "ban")
    const [rule] = await rulesOf(d.workflowId)
    expect(await linksOf(rule!.id)).toEqual([ban.body.id])
    const now = await k.give(owner.token, t, "punish")
    expect(now.status).toBe(201)
    expect(now.body).toMatchObject({ verdict: "punish", rule_ids: [] })
    expect(now.body.id).toBeGreaterThan(ban.body.id)
    expect(await linksOf(rule!.id)).toEqual([])
    expect(await rulesOf(d.workflowId)).toEqual([expect.objectContaining({ id: rule!.id, status: "active" })])
  })

  it("counts each reviewer's latest verdict on the line: repeats add nothing, changed minds move it", async () => {
    const d = await k.campaign(owner)
    const handler = d.handlers[0]!
    const said = "Honestly, {name}, it pays for itself within a month."
    const answer = async (name: string) => {
      await k.turn(d, name, "callee", handler.trigger)
      return k.turn(d, name, "agent", d.fill(said, name))
    }
    const tA = await answer("Asha Rao")
    const tB = await answer("Ben")
    const [b, c, e] = [keys[0]!, keys[1]!, keys[2]!]
    const rules = async () => (await rulesOf(d.workflowId)).map((r) => [r.learnt_kind, r.status, r.priority])
    const give = async (token: string, turn: number, verdict: string) => {
      const res = await k.give(token, turn, verdict)
      expect(res.status).toBe(201)
      return res.body.id as number
    }

    // One reviewer punishing the line said to two callees, then one of them again: one vote.
    const a1 = await give(owner.token, tA, "punish")
    await give(owner.token, tB, "punish")
    expect(await rules()).toEqual([])
    await give(owner.token, tA, "punish")
    expect(await rules()).toEqual([])
    // They change their mind; a second reviewer's punish is then the only one.
    const a4 = await give(owner.token, tA, "reward")
    const b1 = await give(b, tA, "punish")
    expect(await rules()).toEqual([])
    // A third reviewer's punish makes two: the proposal links theirs, none of the owner's.
    const c1 = await give(c, tB, "punish")
    expect(await rules()).toEqual([["punish", "paused", 0]])
    const [punishRule] = await rulesOf(d.workflowId)
    expect(await linksOf(punishRule!.id)).toEqual([b1, c1])
    // Two rewards against two punishes do not outnumber them; the second punisher turning makes three to one.
    const e1 = await give(e, tB, "reward")
    expect(await rules()).toHaveLength(1)
    const b2 = await give(b, tA, "reward")
    expect(await rules()).toEqual([
      ["punish", "paused", 0],
      ["reward", "active", 3],
    ])
    const rewardRule = (await rulesOf(d.workflowId))[1]!
    expect(await linksOf(rewardRule.id)).toEqual([a4, e1, b2])
    expect(await linksOf(punishRule!.id)).toEqual([c1])
    // The same reviewer rewarding again, or punishing and rewarding back, never raises the priority.
    const b3 = await give(b, tB, "reward")
    await give(b, tA, "punish")
    const b5 = await give(b, tA, "reward")
    expect(await rules()).toEqual([
      ["punish", "paused", 0],
      ["reward", "active", 3],
    ])
    expect(b3).toBeLessThan(b5)
    expect(await linksOf(rewardRule.id)).toEqual([a4, e1, b5])
    expect(await linksOf(punishRule!.id)).toEqual([c1])

    // Every verdict is on record; the list marks each reviewer's latest on the line as current.
    const rows = await srv.sql<Array<{ id: number }>>`
      select id from kb_feedback where workflow_id = ${d.workflowId} order by id`
    expect(rows).toHaveLength(11)
    expect(rows[0]!.id).toBe(a1)
    const listed = (await k.call("GET", `/kb/feedback?turn_id=${tA}`, owner.token)).body.feedback as Json[]
    expect(listed.filter((f) => f.current).map((f) => f.id)).toEqual([b5, a4])
    expect(listed).toHaveLength(7)
  })
})

describe("on a real run", () => {
  /** Tops the wallet up through the stub gateway, as a customer would. */
  async function fund(s: Session) {
    const intent = (await k.call("POST", "/billing/topup", s.token, { amount_minor: 1_000_000 })).body
    const res = await k.a.call("POST", "/billing/webhooks/stub", {
      body: { external_id: intent.external_id, status: "succeeded" },
    })
    expect(res.status).toBe(200)
  }

  it("de-fills the call's names and finds the category from the run's rule book", async () => {
    const s = await k.a.signup({ country: "US" })
    await fund(s)
    const [rater] = await k.reviewers(s, 1)
    const w = (await k.call("POST", "/api/workflows", s.token, { nl_prompt: "Call lapsed gym members to rejoin." }))
      .body
    // …6: the simulated callee declines, so the agent answers an objection from the rule book.
    await k.call("POST", `/api/workflows/${w.id}/audience`, s.token, {
      rows: [{ phone: "+12025550106", name: "Dana" }],
    })
    await k.call("PUT", `/api/workflows/${w.id}/compliance`, s.token, {
      consent_attestation_text: "All numbers opted in on our website.",
    })
    const started = await k.call("POST", `/api/workflows/${w.id}/run`, s.token)
    expect(started.status, JSON.stringify(started.body)).toBe(201)
    const runId = started.body.run_id as number
    const deadline = Date.now() + 20_000
    for (;;) {
      const runs = (await k.call("GET", `/api/workflows/${w.id}/runs`, s.token)).body.runs as Json[]
      if (runs.find((r) => r.id === runId)?.status === "completed") break
      if (Date.now() > deadline) throw new Error("the run did not complete")
      await new Promise((r) => setTimeout(r, 100))
    }
    const turns = await srv.sql<Array<{ id: number; speaker: string; text: string }>>`
      select id, speaker, text from turns where run_id = ${runId} order by seq`
    const agent = turns.filter((t) => t.speaker === "agent")
    expect(agent.length).toBeGreaterThan(1)

    // The opening names the callee, the agent and the company: all three come back as placeholders.
    const opening = agent[0]!
    expect(opening.text).toContain("Dana")
    const fb = await k.give(s.token, opening.id, "ban")
    expect(fb.status).toBe(201)
    expect(fb.body.line).toContain("{name}")
    expect(fb.body.line).toContain("{agent_name}")
    expect(fb.body.line).toContain("{company}")
    expect(fb.body.line).not.toContain("Dana")
    const [ban] = await rulesOf(w.id)
    expect(ban).toMatchObject({ bucket: "banned_phrases", body: fb.body.line, status: "active" })

    // An agent line that is one of the rule book's handler responses: two rewards weigh it in that category.
    const book = w.rule_book as { persona: string; objection_handlers: Array<{ category: string; response: string }> }
    const [tenant] = await srv.sql<[{ name: string }]>`select name from tenants where id = ${s.tenantId}`
    const filled = (h: { response: string }) =>
      lineKey(
        fillPlaceholders(h.response, {
          name: "Dana",
          agentName: findVoice(book.persona)?.name ?? "Alex",
          company: tenant!.name,
        }),
      )
    // (This callee speaks over the agent's answer: the stored line is what was played, the start of the response.)
    const answers = (h: { response: string }, text: string) =>
      filled(h) === lineKey(text) || filled(h).startsWith(`${lineKey(text)} `)
    const answered = agent.find((t) => t !== opening && book.objection_handlers.some((h) => answers(h, t.text)))
    expect(answered, JSON.stringify(turns)).toBeDefined()
    const handler = book.objection_handlers.find((h) => answers(h, answered!.text))!
    await k.give(s.token, answered!.id, "reward")
    const second = await k.give(rater!, answered!.id, "reward")
    const learnt = (await rulesOf(w.id)).find((r) => r.learnt_kind === "reward")
    expect(learnt).toMatchObject({
      bucket: `objection.${categoryToken(handler.category)}`,
      trigger: { phrases: [], category: categoryToken(handler.category) },
      priority: 2,
      status: "active",
    })
    expect(second.body.rule_ids).toEqual([learnt!.id])
  }, 30_000)
})
