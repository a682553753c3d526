// Simulation campaigns through the real server: creation (the hidden workflow, its simulated
// audience and held run), the 422s and 409s of StartBody, the active limit, isolation, scopes,
// seed determinism, hidden workflows kept out of the workflow endpoints, OpenAPI, the wallet.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SIM_PERSONAS } from "../../src/personas/sim-personas.js"
import { DEFAULT_SIM_MIX } from "../../src/rehearsals/mix.js"
import { campaign, type Json, type SimServer, simServer, workflow } from "./sim.support.js"

let h: SimServer
beforeAll(async () => {
  h = await simServer()
})
afterAll(async () => h?.srv.stop())

const create = (s: { token: string } | string, body: unknown) => h.call("POST", "/api/sim/campaigns", s, body)
const stop = (s: { token: string }, id: number) => h.call("POST", `/api/sim/campaigns/${id}/stop`, s)

describe("POST /api/sim/campaigns", () => {
  it("201: a ready campaign, free, with a hidden workflow holding its simulated audience and held run", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const c = await campaign(h, s, { workflow_id: w.id, seed: 12345, time_scale: 0.5 })
    expect(c).toMatchObject({
      workflow_id: w.id,
      state: "ready",
      size: 20,
      batch_size: 10,
      seed: 12345,
      time_scale: 0.5,
      mix: DEFAULT_SIM_MIX,
      progress: { done: 0, released: 0, in_flight: 0, size: 20 },
      pending_question: null,
      forecast: null,
      charged_minor: 0,
      free: true,
      turns_stream: `/api/runs/${c.run_id}/turns/stream`,
    })
    expect(c.outcomes).toMatchObject({ agreed: 0, declined: 0, approvals_asked: 0, by_outcome: {} })

    const [hidden] = await h.srv.sql<[Json]>`
      select w.id, w.name, w.status, w.simulation_of, w.rule_book_id, w.persona, w.tenant_id
      from workflows w join sim_campaigns c on c.sim_workflow_id = w.id where c.id = ${c.id}`
    expect(hidden).toMatchObject({
      name: `Simulation ${c.id} of ${w.name}`,
      status: "live",
      simulation_of: w.id,
      rule_book_id: w.rule_book_id,
      persona: w.persona,
      tenant_id: s.tenantId,
    })
    const audience = await h.srv.sql<{ phone_e164: string; name: string; persona: string }[]>`
      select phone_e164, name, fields->>'sim_persona' as persona from audience_targets
      where workflow_id = ${hidden.id} order by id`
    expect(audience).toHaveLength(20)
    for (const t of audience) {
      expect(t.phone_e164).toMatch(/^\+1202555\d{4}$/)
      const persona = SIM_PERSONAS.find((p) => p.id === t.persona)!
      expect(persona.digits).toContain(Number(t.phone_e164.at(-1)))
      expect(t.name.startsWith(persona.name)).toBe(true)
    }
    const [run] = await h.srv.sql<[Json]>`select workflow_id, status, rule_book_id, targets_total from runs
      where id = ${c.run_id}`
    expect(run).toEqual({ workflow_id: hidden.id, status: "running", rule_book_id: w.rule_book_id, targets_total: 20 })
    const targets = await h.runTargets(c.run_id)
    expect(targets.every((t) => t.status === "queued" && t.held)).toBe(true)
  })

  it("422 for sizes, batch sizes, mixes, seeds and ids out of bounds; 201 at the bounds", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const bad: Array<[Json, string]> = [
      [{ size: 0 }, "size"],
      [{ size: 501 }, "size"],
      [{ size: 2.5 }, "size"],
      [{ batch_size: 0 }, "batch_size"],
      [{ batch_size: 101 }, "batch_size"],
      [{ mix: { agrees: 1, nobody: 2 } }, "mix.nobody"],
      [{ mix: { agrees: -1 } }, "mix.agrees"],
      [{ mix: { agrees: 0 } }, "mix"],
      [{ mix: ["agrees"] }, "mix"],
      [{ seed: -1 }, "seed"],
      [{ seed: 2 ** 32 }, "seed"],
      [{ time_scale: -0.1 }, "time_scale"],
      [{ workflow_id: "x" }, "workflow_id"],
    ]
    for (const [extra, field] of bad) {
      const res = await create(s, { workflow_id: w.id, ...extra })
      expect(res.status, JSON.stringify(extra)).toBe(422)
      expect(res.body.code).toBe("VALIDATION_FAILED")
      expect(
        (res.body.errors as Json[]).map((e) => e.field),
        JSON.stringify(extra),
      ).toContain(field)
    }
    expect((await create(s, {})).status).toBe(422)
    expect(await h.srv.sql`select id from sim_campaigns where tenant_id = ${s.tenantId}`).toHaveLength(0)

    for (const bounds of [
      { size: 1, batch_size: 1 },
      { size: 500, batch_size: 100 },
    ]) {
      const c = await campaign(h, s, { workflow_id: w.id, ...bounds })
      expect(c).toMatchObject({ ...bounds, progress: { size: bounds.size } })
      expect(await h.runTargets(c.run_id)).toHaveLength(bounds.size)
      expect((await stop(s, c.id)).status).toBe(200)
    }
    const mixed = await campaign(h, s, { workflow_id: w.id, size: 30, mix: { "wants-discount": 3, declines: 1 } })
    expect(mixed.mix).toEqual({ "wants-discount": 3, declines: 1 })
    const personas = await h.srv.sql<{ persona: string }[]>`
      select distinct a.fields->>'sim_persona' as persona from audience_targets a
      join run_targets t on t.target_id = a.id where t.run_id = ${mixed.run_id}`
    expect(personas.map((p) => p.persona).sort()).toEqual(["declines", "wants-discount"])
  })

  it("cannot rehearse: 409 without a rule book, 422 with an invalid one, 404 elsewhere", async () => {
    const s = await h.a.signup({ country: "US" })
    const [bare] = await h.srv.sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt) values (${s.tenantId}, 'No book', 'asha', '')
      returning id`
    const none = await create(s, { workflow_id: bare.id })
    expect(none.status).toBe(409)
    expect(none.body).toMatchObject({ code: "WORKFLOW_NOT_READY", missing: ["rule_book"] })

    const w = await workflow(h, s)
    await h.srv
      .sql`update rule_books set body = jsonb_set(body, '{max_call_seconds}', '5') where id = ${w.rule_book_id}`
    const invalid = await create(s, { workflow_id: w.id })
    expect(invalid.status).toBe(422)
    expect(invalid.body.code).toBe("RULE_BOOK_INVALID")

    const other = await h.a.signup({ country: "US" })
    const theirs = await workflow(h, other)
    expect((await create(s, { workflow_id: theirs.id })).body.code).toBe("NOT_FOUND")
    expect((await create(s, { workflow_id: 999_999_999 })).status).toBe(404)
    // A campaign's hidden workflow is not a workflow one can rehearse.
    const c = await campaign(h, other, { workflow_id: theirs.id, size: 2 })
    const [{ sim_workflow_id }] = await h.srv.sql<[{ sim_workflow_id: number }]>`
      select sim_workflow_id from sim_campaigns where id = ${c.id}`
    expect((await create(other, { workflow_id: sim_workflow_id })).status).toBe(404)
    await h.call("POST", `/api/workflows/${theirs.id}/retire`, other)
    expect((await create(other, { workflow_id: theirs.id })).body.code).toBe("WORKFLOW_RETIRED")
  })

  it("at most 3 active per workspace: the 4th is 409 SIM_CAMPAIGN_LIMIT; a stopped one frees a place", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const ids: number[] = []
    for (let i = 0; i < 3; i++) ids.push((await campaign(h, s, { workflow_id: w.id, size: 2 })).id)
    const fourth = await create(s, { workflow_id: w.id, size: 2 })
    expect(fourth.status).toBe(409)
    expect(fourth.body).toMatchObject({ code: "SIM_CAMPAIGN_LIMIT", limit: 3 })
    // Other workspaces are not affected.
    const other = await h.a.signup({ country: "US" })
    await campaign(h, other, { workflow_id: (await workflow(h, other)).id, size: 2 })

    expect((await stop(s, ids[0]!)).body.state).toBe("stopped")
    await campaign(h, s, { workflow_id: w.id, size: 2 })
    // Resuming the stopped one would make a 4th active.
    const resumed = await h.call("POST", `/api/sim/campaigns/${ids[0]}/resume`, s)
    expect(resumed.status).toBe(409)
    expect(resumed.body.code).toBe("SIM_CAMPAIGN_LIMIT")
    expect((await h.call("GET", `/api/sim/campaigns/${ids[0]}`, s)).body.state).toBe("stopped")
    const listed = await h.call("GET", "/api/sim/campaigns", s)
    expect(listed.body.active_limit).toBe(3)
    expect((listed.body.campaigns as Json[]).map((c) => c.id)).toEqual(
      [...(listed.body.campaigns as Json[]).map((c) => c.id)].sort((x, y) => y - x),
    )
    expect(listed.body.campaigns).toHaveLength(4)
  })
})

describe("isolation and scopes", () => {
  it("another workspace's campaign is 404 for every route, and not listed", async () => {
    const s = await h.a.signup({ country: "US" })
    const c = await campaign(h, s, { workflow_id: (await workflow(h, s)).id, size: 2 })
    const other = await h.a.signup({ country: "US" })
    for (const [method, path, body] of [
      ["GET", "", undefined],
      ["POST", "/run-batch", undefined],
      ["POST", "/resume", undefined],
      ["POST", "/stop", undefined],
      ["POST", "/answer", { question_id: 1, decision: "approve" }],
    ] as const) {
      const res = await h.call(method, `/api/sim/campaigns/${c.id}${path}`, other, body)
      expect(res.status, `${method} ${path}`).toBe(404)
      expect(res.body.code).toBe("NOT_FOUND")
    }
    expect((await h.call("GET", "/api/sim/campaigns", other)).body.campaigns).toEqual([])
    expect((await h.call("GET", `/api/sim/campaigns/${c.id}`, s)).body.state).toBe("ready")
  })

  it("a read key reads but cannot create or command (403); a write key can", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const c = await campaign(h, s, { workflow_id: w.id, size: 2 })
    const read = (await h.a.createKey(s, { name: "reader", scope: "read" })).secret
    const write = (await h.a.createKey(s, { name: "writer", scope: "write" })).secret
    expect((await h.call("GET", `/api/sim/campaigns/${c.id}`, read)).status).toBe(200)
    expect((await h.call("GET", "/api/sim/campaigns", read)).status).toBe(200)
    const denied = await create(read, { workflow_id: w.id })
    expect(denied.status).toBe(403)
    expect(denied.body.code).toBe("INSUFFICIENT_SCOPE")
    for (const path of ["run-batch", "stop", "resume"])
      expect((await h.call("POST", `/api/sim/campaigns/${c.id}/${path}`, read)).status).toBe(403)
    expect((await h.call("POST", `/api/sim/campaigns/${c.id}/run-batch`, write)).status).toBe(202)
    expect((await create(write, { workflow_id: w.id, size: 2 })).status).toBe(201)
    expect((await h.a.call("GET", `/api/sim/campaigns/${c.id}`)).status).toBe(401)
  })
})

describe("seed determinism", () => {
  const callees = (runId: number) =>
    h.srv.sql<{ phone: string; name: string; persona: string }[]>`
      select a.phone_e164 as phone, a.name, a.fields->>'sim_persona' as persona
      from run_targets t join audience_targets a on a.id = t.target_id where t.run_id = ${runId} order by t.id`

  it("the same seed, size and mix draw the same numbers and personas; another seed others; none → random", async () => {
    const s = await h.a.signup({ country: "US" })
    const other = await h.a.signup({ country: "US" })
    const body = (w: Json) => ({ workflow_id: w.id, seed: 2024, size: 40, mix: DEFAULT_SIM_MIX })
    const one = await campaign(h, s, body(await workflow(h, s)))
    const two = await campaign(h, other, body(await workflow(h, other)))
    const first = await callees(one.run_id)
    expect(first).toHaveLength(40)
    expect(new Set(first.map((c) => c.phone)).size).toBe(40)
    expect(await callees(two.run_id)).toEqual(first)

    const third = await campaign(h, s, { ...body(await workflow(h, s)), seed: 2025 })
    expect(await callees(third.run_id)).not.toEqual(first)
    const random = await create(other, { workflow_id: (await workflow(h, other)).id, size: 2 })
    expect(Number.isInteger(random.body.seed)).toBe(true)
  })
})

describe("hidden workflows stay out of the workflow endpoints", () => {
  it("not listed; GET, PUT, runs, run and pause of one are 404", async () => {
    const s = await h.a.signup({ country: "US" })
    const w = await workflow(h, s)
    const c = await campaign(h, s, { workflow_id: w.id, size: 2 })
    const [{ sim_workflow_id: hidden }] = await h.srv.sql<[{ sim_workflow_id: number }]>`
      select sim_workflow_id from sim_campaigns where id = ${c.id}`
    const list = await h.call("GET", "/api/workflows", s)
    expect((list.body.workflows as Json[]).map((x) => x.id)).toEqual([w.id])
    expect((await h.call("GET", `/api/workflows/${hidden}`, s)).status).toBe(404)
    expect((await h.call("PUT", `/api/workflows/${hidden}`, s, { name: "renamed" })).status).toBe(404)
    expect((await h.call("GET", `/api/workflows/${hidden}/runs`, s)).status).toBe(404)
    expect((await h.call("POST", `/api/workflows/${hidden}/run`, s)).status).toBe(404)
    expect((await h.call("POST", `/api/workflows/${hidden}/pause`, s)).status).toBe(404)
    const upload = await h.call("POST", `/api/workflows/${hidden}/audience`, s, { rows: [{ phone: "+12025550123" }] })
    expect(upload.status).toBe(404)
    expect((await h.call("GET", `/api/workflows/${w.id}`, s)).status).toBe(200)
    const [row] = await h.srv.sql<[{ name: string; status: string }]>`select name, status from workflows
      where id = ${hidden}`
    expect(row).toEqual({ name: `Simulation ${c.id} of ${w.name}`, status: "live" })
  })
})

describe("OpenAPI", () => {
  it("lists the campaign routes, their scopes and the states with their transitions", async () => {
    const doc = (await (await h.a.call("GET", "/openapi.json")).json()) as Json
    const paths = doc.paths as Json
    expect(Object.keys(paths["/api/sim/campaigns"]).sort()).toEqual(["get", "post"])
    expect(Object.keys(paths["/api/sim/campaigns/{campaign_id}"])).toEqual(["get"])
    for (const action of ["run-batch", "answer", "resume", "stop"])
      expect(Object.keys(paths[`/api/sim/campaigns/{campaign_id}/${action}`])).toEqual(["post"])
    expect(paths["/api/sim/campaigns"].post["x-required-scope"]).toBe("write")
    expect(paths["/api/sim/campaigns/{campaign_id}"].get["x-required-scope"]).toBe("read")
    expect(Object.keys(paths["/api/sim/campaigns/{campaign_id}/run-batch"].post.responses)).toContain("202")
    const campaignSchema = paths["/api/sim/campaigns/{campaign_id}"].get.responses["200"].content["application/json"]
      .schema as Json
    const state = campaignSchema.properties.state as Json
    expect(state.enum).toEqual(["ready", "running", "awaiting_answer", "completed", "stopped", "failed"])
    for (const phrase of [
      "run-batch",
      "awaiting_answer",
      "answer",
      "stop",
      "resume",
      "completed",
      "SIM_CAMPAIGN_STATE",
    ])
      expect(state.description).toContain(phrase)
    const start = paths["/api/sim/campaigns"].post.requestBody.content["application/json"].schema as Json
    expect(start.required).toEqual(["workflow_id"])
    expect(start.properties.size).toMatchObject({ minimum: 1, maximum: 500 })
    expect(start.properties.batch_size).toMatchObject({ minimum: 1, maximum: 100 })
    expect((doc.components as Json).schemas.ErrorCode.enum).toEqual(
      expect.arrayContaining(["SIM_CAMPAIGN_LIMIT", "SIM_CAMPAIGN_STATE"]),
    )
  })
})
