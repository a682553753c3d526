// Verdicts on the agent's turns through the real server: validation (422 per field, 404 for another
// workspace's turn, 422 for a callee's turn), every verdict kept as a row of its own (a reviewer's
// next one too: 201), a retry under one Idempotency-Key replayed, the list's filters, limits and
// `current` flags, scopes, and the timeline entries.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Session } from "../support/clients.js"
import { SYSTEM_KEY } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { type Campaign, type Json, kbClient } from "./feedback.support.js"

let srv: TestServer
let k: ReturnType<typeof kbClient>
let owner: Session
let other: Session
let c: Campaign

beforeAll(async () => {
  srv = await sharedTestServer({ env: { SYSTEM_KEY } })
  k = kbClient(srv)
  owner = await k.a.signup({ country: "US" })
  other = await k.a.signup({ country: "US" })
  c = await k.campaign(owner)
})
afterAll(async () => srv?.stop())

const rowsOf = (turnId: number) =>
  srv.sql<Array<{ id: number; verdict: string; reviewer: string; note: string | null }>>`
    select id, verdict, reviewer, note from kb_feedback where turn_id = ${turnId} order by id`

describe("POST /kb/feedback", () => {
  it("stores a verdict on an agent turn with the line de-filled and the reviewer (201)", async () => {
    await k.turn(c, "Asha Rao", "callee", "Who is this?")
    const t = await k.turn(c, "Asha Rao", "agent", c.fill("Hi {name}, I'm {agent_name} from {company}.", "Asha Rao"))
    const res = await k.give(owner.token, t, "reward", "  nice opener  ")
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.any(Number),
      turn_id: t,
      run_id: c.runId,
      workflow_id: c.workflowId,
      verdict: "reward",
      note: "nice opener",
      line: "Hi {name}, I'm {agent_name} from {company}.",
      reviewer: { kind: "user", id: owner.userId },
      rule_ids: [],
      current: true,
      created_at: expect.any(String),
      updated_at: res.body.created_at,
    })
    const [row] = await srv.sql<[{ line_key: string; reviewer: string }]>`
      select line_key, reviewer from kb_feedback where id = ${res.body.id}`
    expect(row).toEqual({ line_key: "hi name i'm agent name from company", reviewer: `user:${owner.userId}` })
  })

  it("answers 422 per field: verdict, turn_id, note", async () => {
    const t = await k.turn(c, "Ben", "agent", "Thanks for your time.")
    const cases: Array<[Json, string]> = [
      [{ turn_id: t, verdict: "love" }, "verdict"],
      [{ turn_id: t }, "verdict"],
      [{ verdict: "ban" }, "turn_id"],
      [{ turn_id: "12", verdict: "ban" }, "turn_id"],
      [{ turn_id: 0, verdict: "ban" }, "turn_id"],
      [{ turn_id: 1.5, verdict: "ban" }, "turn_id"],
      [{ turn_id: t, verdict: "ban", note: "x".repeat(1001) }, "note"],
      [{ turn_id: t, verdict: "ban", note: 7 }, "note"],
    ]
    for (const [body, field] of cases) {
      const res = await k.call("POST", "/kb/feedback", owner.token, body)
      expect(res.status, JSON.stringify(body)).toBe(422)
      expect(res.body.code).toBe("VALIDATION_FAILED")
      expect(res.body.errors.map((e: Json) => e.field)).toContain(field)
    }
    // 1000 characters is the limit, not past it.
    expect((await k.give(owner.token, t, "punish", "y".repeat(1000))).status).toBe(201)
    expect(await rowsOf(t)).toHaveLength(1)
  })

  it("answers 404 for a turn that is not the workspace's, and 422 for a callee's or system turn", async () => {
    const t = await k.turn(c, "Ben", "agent", "Shall we go ahead?")
    const theirs = await k.give(other.token, t, "ban")
    expect(theirs.status).toBe(404)
    expect(theirs.body.code).toBe("NOT_FOUND")
    expect((await k.give(owner.token, 999_999_999, "ban")).status).toBe(404)
    for (const speaker of ["callee", "system"] as const) {
      const u = await k.turn(c, "Ben", speaker, "I'm not sure.")
      const res = await k.give(owner.token, u, "ban")
      expect(res.status).toBe(422)
      expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", errors: [{ field: "turn_id" }] })
    }
    expect(await rowsOf(t)).toHaveLength(0)
  })

  it("keeps every verdict: the same reviewer's next one on the turn is a new row (201), listed", async () => {
    const t = await k.turn(c, "Ben", "agent", "It only takes a minute.")
    const first = await k.give(owner.token, t, "reward", "good")
    expect(first.status).toBe(201)
    const again = await k.give(owner.token, t, "reward", "good")
    expect(again.status).toBe(201)
    const changed = await k.give(owner.token, t, "punish")
    expect(changed.status).toBe(201)
    expect(changed.body).toMatchObject({ verdict: "punish", note: null, current: true })
    const ids = [first.body.id, again.body.id, changed.body.id]
    expect(new Set(ids).size).toBe(3)
    const me = `user:${owner.userId}`
    expect(await rowsOf(t)).toEqual([
      { id: ids[0], verdict: "reward", reviewer: me, note: "good" },
      { id: ids[1], verdict: "reward", reviewer: me, note: "good" },
      { id: ids[2], verdict: "punish", reviewer: me, note: null },
    ])

    const [key] = await k.reviewers(owner, 1)
    const byKey = await k.give(key!, t, "reward")
    expect(byKey.status).toBe(201)
    expect(byKey.body.reviewer).toEqual({ kind: "api_key", id: expect.any(Number) })
    expect(await rowsOf(t)).toHaveLength(4)
    // The list has them all, newest first; only each reviewer's latest is current.
    const listed = await k.call("GET", `/kb/feedback?turn_id=${t}`, owner.token)
    expect(listed.status).toBe(200)
    expect(listed.body.feedback.map((f: Json) => [f.id, f.verdict, f.current])).toEqual([
      [byKey.body.id, "reward", true],
      [ids[2], "punish", true],
      [ids[1], "reward", false],
      [ids[0], "reward", false],
    ])
    const rewards = await k.call("GET", `/kb/feedback?turn_id=${t}&verdict=reward`, owner.token)
    expect(rewards.body.feedback.map((f: Json) => f.id)).toEqual([byKey.body.id, ids[1], ids[0]])
  })

  it("replays a retry under the same Idempotency-Key (one row); another key is another verdict", async () => {
    const t = await k.turn(c, "Ben", "agent", "May I send you the details?")
    const post = async (key: string) => {
      const res = await k.a.call("POST", "/kb/feedback", {
        token: owner.token,
        body: { turn_id: t, verdict: "punish" },
        headers: { "idempotency-key": key },
      })
      return { status: res.status, body: (await res.json()) as Json, replayed: res.headers.get("idempotent-replayed") }
    }
    const first = await post(`fb-${t}-1`)
    expect(first).toMatchObject({ status: 201, replayed: null })
    const retry = await post(`fb-${t}-1`)
    expect(retry).toMatchObject({ status: 201, replayed: "true", body: { id: first.body.id } })
    expect(await rowsOf(t)).toHaveLength(1)
    const next = await post(`fb-${t}-2`)
    expect(next).toMatchObject({ status: 201, replayed: null })
    expect(next.body.id).not.toBe(first.body.id)
    expect((await rowsOf(t)).map((r) => r.id)).toEqual([first.body.id, next.body.id])
  })

  it("needs write scope: a read key is refused, and reads the list", async () => {
    const t = await k.turn(c, "Ben", "agent", "Is now a good time?")
    const read = await k.a.createKey(owner, { name: "reader", scope: "read" })
    const res = await k.give(read.secret, t, "ban")
    expect(res.status).toBe(403)
    expect((await k.call("GET", `/kb/feedback?turn_id=${t}`, read.secret)).status).toBe(200)
    expect((await k.call("POST", "/kb/feedback", "", { turn_id: t, verdict: "ban" })).status).toBe(401)
  })
})

describe("GET /kb/feedback", () => {
  it("filters by turn and verdict, newest first, and limits 1–1000", async () => {
    const s = await k.a.signup({ country: "US" })
    const d = await k.campaign(s)
    const turns: number[] = []
    for (let i = 0; i < 4; i++) turns.push(await k.turn(d, "Ben", "agent", `Line number ${i}.`))
    const verdicts = ["reward", "punish", "reward", "ban"] as const
    const ids: number[] = []
    for (const [i, v] of verdicts.entries()) ids.push((await k.give(s.token, turns[i], v)).body.id)

    const all = await k.call("GET", "/kb/feedback", s.token)
    expect(all.status).toBe(200)
    expect(all.body.feedback.map((f: Json) => f.id)).toEqual([...ids].reverse())
    expect(all.body.feedback[0]).toMatchObject({ verdict: "ban", turn_id: turns[3], rule_ids: [expect.any(Number)] })

    const rewards = await k.call("GET", "/kb/feedback?verdict=reward", s.token)
    expect(rewards.body.feedback.map((f: Json) => f.id)).toEqual([ids[2], ids[0]])
    const one = await k.call("GET", `/kb/feedback?turn_id=${turns[1]}`, s.token)
    expect(one.body.feedback.map((f: Json) => f.verdict)).toEqual(["punish"])
    expect((await k.call("GET", `/kb/feedback?turn_id=${turns[1]}&verdict=ban`, s.token)).body.feedback).toEqual([])

    expect((await k.call("GET", "/kb/feedback?limit=1", s.token)).body.feedback.map((f: Json) => f.id)).toEqual([
      ids[3],
    ])
    expect((await k.call("GET", "/kb/feedback?limit=1000", s.token)).body.feedback).toHaveLength(4)
    for (const q of ["limit=0", "limit=1001", "limit=x", "verdict=meh", "turn_id=0", "turn_id=abc"]) {
      const res = await k.call("GET", `/kb/feedback?${q}`, s.token)
      expect(res.status, q).toBe(422)
      expect(res.body.code).toBe("VALIDATION_FAILED")
    }
    // Another workspace sees none of it.
    expect((await k.call("GET", "/kb/feedback", other.token)).body.feedback).toEqual([])
    expect((await k.call("GET", `/kb/feedback?turn_id=${turns[0]}`, other.token)).body.feedback).toEqual([])
  })
})

describe("the timeline", () => {
  it("shows a ban and the rule learnt from it on the contact's and the reviewer's timelines", async () => {
    const s = await k.a.signup({ country: "US" })
    const d = await k.campaign(s, ["Carla"])
    const t = await k.turn(d, "Carla", "agent", d.fill("Best price in town, {name}, guaranteed!", "Carla"))
    expect((await k.give(s.token, t, "ban")).status).toBe(201)

    const [phone] = await srv.sql<[{ phone_e164: string }]>`
      select phone_e164 from audience_targets where workflow_id = ${d.workflowId}`
    const byPhone = await k.call("GET", `/api/timeline?phone=${encodeURIComponent(phone!.phone_e164)}`, s.token)
    expect(byPhone.status).toBe(200)
    const kb = (byPhone.body.events as Json[]).filter((e) => e.kind === "kb")
    expect(kb.map((e) => e.summary)).toEqual([
      "Rule “Never say “Best price in town, {name}, guaranteed!”” learnt from a ban",
      "Ban on the agent's line “Best price in town, {name}, guaranteed!”",
    ])
    expect(kb[1]).toMatchObject({
      direction: "inbound",
      workflow_id: d.workflowId,
      run_id: d.runId,
      payload: { action: "feedback_given", verdict: "ban", turn_id: t },
    })
    expect(kb[0]).toMatchObject({ direction: "outbound", payload: { action: "rule_learnt", bucket: "banned_phrases" } })

    // The reviewer's own rule changes are on his timeline too.
    const made = await k.call("POST", "/kb/rules", s.token, { bucket: "closing", title: "Thank", body: "Thank them." })
    expect(made.status).toBe(201)
    expect((await k.call("DELETE", `/kb/rules/${made.body.id}`, s.token)).status).toBe(200)
    const byUser = await k.call("GET", `/api/timeline?user_id=${s.userId}`, s.token)
    expect((byUser.body.events as Json[]).filter((e) => e.kind === "kb").map((e) => e.payload.action)).toEqual([
      "rule_archived",
      "rule_created",
      "rule_learnt",
      "feedback_given",
    ])
    // Not on another workspace's timeline of the same number.
    const theirs = await k.call("GET", `/api/timeline?phone=${encodeURIComponent(phone!.phone_e164)}`, other.token)
    expect((theirs.body.events as Json[]).filter((e) => e.kind === "kb")).toEqual([])
  })
})
