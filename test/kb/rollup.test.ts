// GET /kb/rollup through the real server: counts (promoted = verdicts linked to a rule), the top
// turns by total then recency, a reviewer's repeated and changed verdicts each a flag, the rules
// learnt from feedback newest first, the window (1–365, verdicts outside it left out), a workflow
// filter (another workspace's: 404) and isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Session } from "../support/clients.js"
import { SYSTEM_KEY } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { type Campaign, type Json, kbClient } from "./feedback.support.js"

let srv: TestServer
let k: ReturnType<typeof kbClient>
let owner: Session
let other: Session
let keys: string[]
let c: Campaign
let d: Campaign
const t: number[] = []

beforeAll(async () => {
  srv = await sharedTestServer({ env: { SYSTEM_KEY } })
  k = kbClient(srv)
  owner = await k.a.signup({ country: "US" })
  other = await k.a.signup({ country: "US" })
  keys = await k.reviewers(owner, 2)
  c = await k.campaign(owner)
  d = await k.campaign(owner)
  const long = `Let me tell you everything about our plans. ${"Really, it is a very good plan. ".repeat(10)}`
  t.push(await k.turn(c, "Ben", "agent", "Buy it now or regret it.")) // 0: ban ×2
  t.push(await k.turn(c, "Ben", "agent", long)) // 1: punish ×3
  t.push(await k.turn(c, "Ben", "agent", "Thanks for your time.")) // 2: reward ×1
  t.push(await k.turn(d, "Ben", "agent", "Only in the other workflow.")) // 3: reward ×2, punish... see below
  await k.give(owner.token, t[0], "ban")
  await k.give(keys[0]!, t[0], "ban")
  await k.give(owner.token, t[1], "punish")
  await k.give(keys[0]!, t[1], "punish", "Keep it short.")
  await k.give(keys[1]!, t[1], "punish")
  await k.give(owner.token, t[2], "reward")
  await k.give(owner.token, t[3], "reward")
  await k.give(keys[0]!, t[3], "punish")
})
afterAll(async () => srv?.stop())

const rollup = (qs = "", s: Session = owner) => k.call("GET", `/kb/rollup${qs}`, s.token)

describe("GET /kb/rollup", () => {
  it("counts verdicts and the promoted ones, ranks the turns and lists the learnt rules", async () => {
    const res = await rollup()
    expect(res.status).toBe(200)
    expect(res.body.window_days).toBe(30)
    // Promoted: 2 bans (one rule) + 3 punishes (the paused proposal).
    expect(res.body.counts).toEqual({ reward: 2, punish: 4, ban: 2, promoted: 5 })
    const top = res.body.top_turns as Json[]
    expect(top.map((x) => x.turn_id)).toEqual([t[1], t[3], t[0], t[2]])
    expect(top[0]).toEqual({
      turn_id: t[1],
      text: expect.any(String),
      verdicts: { reward: 0, punish: 3, ban: 0 },
      total: 3,
    })
    expect((top[0]!.text as string).length).toBeLessThanOrEqual(160)
    expect(top[0]!.text).toMatch(/^Let me tell you everything about our plans\. .*…$/)
    // t[3] and t[0] tie on 2: the more recently judged first.
    expect(top[1]).toMatchObject({ verdicts: { reward: 1, punish: 1, ban: 0 }, total: 2 })
    expect(top[2]).toMatchObject({ text: "Buy it now or regret it.", verdicts: { ban: 2 }, total: 2 })

    const rules = res.body.rules_from_feedback as Json[]
    expect(rules.map((r) => [r.bucket, r.status, r.feedback_count])).toEqual([
      ["review", "paused", 3],
      ["banned_phrases", "active", 2],
    ])
    expect(rules[0]).toMatchObject({ source_kind: "feedback", body: "Keep it short.", workflow_id: c.workflowId })
    expect(rules[0]!.feedback_ids).toHaveLength(3)
    expect(rules[1]!.title).toBe("Never say “Buy it now or regret it.”")
  })

  it("counts every verdict given as a flag, a reviewer's repeated and changed ones too", async () => {
    const s = await k.a.signup({ country: "US" })
    const [key] = await k.reviewers(s, 1)
    const e = await k.campaign(s)
    const x = await k.turn(e, "Ben", "agent", "You would be silly to say no.")
    const y = await k.turn(e, "Ben", "agent", "Have a lovely day.")
    for (const [token, turn, verdict] of [
      [s.token, x, "punish"],
      [s.token, x, "punish"],
      [key!, x, "punish"],
      [s.token, y, "reward"],
    ] as const)
      expect((await k.give(token, turn, verdict)).status).toBe(201)
    // Two reviewers' punishes made the proposal, which links the owner's latest and the key's.
    const first = await rollup("", s)
    expect(first.body.counts).toEqual({ reward: 1, punish: 3, ban: 0, promoted: 2 })
    expect(first.body.top_turns.map((r: Json) => [r.turn_id, r.verdicts, r.total])).toEqual([
      [x, { reward: 0, punish: 3, ban: 0 }, 3],
      [y, { reward: 1, punish: 0, ban: 0 }, 1],
    ])
    expect(first.body.rules_from_feedback.map((r: Json) => r.feedback_count)).toEqual([2])
    // The owner changes their mind: one more flag on the turn, and their punish leaves the rule.
    expect((await k.give(s.token, x, "reward")).status).toBe(201)
    const after = await rollup("", s)
    expect(after.body.counts).toEqual({ reward: 2, punish: 3, ban: 0, promoted: 1 })
    expect(after.body.top_turns[0]).toMatchObject({ turn_id: x, verdicts: { reward: 1, punish: 3, ban: 0 }, total: 4 })
    expect(after.body.rules_from_feedback.map((r: Json) => r.feedback_count)).toEqual([1])
    // The list of the turn's verdicts agrees with the rollup's total.
    expect((await k.call("GET", `/kb/feedback?turn_id=${x}`, s.token)).body.feedback).toHaveLength(4)
  })

  it("filters by workflow; another workspace's workflow is 404 and another workspace sees nothing", async () => {
    const one = await rollup(`?workflow_id=${d.workflowId}`)
    expect(one.body.counts).toEqual({ reward: 1, punish: 1, ban: 0, promoted: 0 })
    expect(one.body.top_turns.map((x: Json) => x.turn_id)).toEqual([t[3]])
    expect(one.body.rules_from_feedback).toEqual([])
    const theirs = await rollup(`?workflow_id=${c.workflowId}`, other)
    expect(theirs.status).toBe(404)
    expect(theirs.body.code).toBe("NOT_FOUND")
    expect((await rollup("?workflow_id=999999999")).status).toBe(404)
    const empty = await rollup("", other)
    expect(empty.body).toMatchObject({
      counts: { reward: 0, punish: 0, ban: 0, promoted: 0 },
      top_turns: [],
      rules_from_feedback: [],
    })
  })

  it("counts only verdicts given within the window (1–365; 422 outside)", async () => {
    // Move the ban verdicts and their rule 10 days back.
    await srv.sql`update kb_feedback set created_at = created_at - interval '10 days' where turn_id = ${t[0]!}`
    await srv.sql`update kb_rules set created_at = created_at - interval '10 days'
      where workflow_id = ${c.workflowId} and bucket = 'banned_phrases'`
    const week = await rollup("?window_days=7")
    expect(week.body.window_days).toBe(7)
    expect(week.body.counts).toEqual({ reward: 2, punish: 4, ban: 0, promoted: 3 })
    expect(week.body.top_turns.map((x: Json) => x.turn_id)).not.toContain(t[0])
    expect(week.body.rules_from_feedback.map((r: Json) => r.bucket)).toEqual(["review"])
    expect((await rollup("?window_days=11")).body.counts.ban).toBe(2)
    expect((await rollup("?window_days=1")).status).toBe(200)
    expect((await rollup("?window_days=365")).status).toBe(200)
    for (const q of ["?window_days=0", "?window_days=366", "?window_days=x", "?workflow_id=0", "?workflow_id=abc"]) {
      const res = await rollup(q)
      expect(res.status, q).toBe(422)
      expect(res.body.code).toBe("VALIDATION_FAILED")
    }
  })
})
