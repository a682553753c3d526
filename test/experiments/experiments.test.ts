// Experiments end to end (issue 39): a campaign split between two arms on the simulator, where the
// arms' rule books make the simulated callees answer differently (discount seekers agree only where
// the agent may offer a discount); the readout names the better arm with an interval that excludes
// zero; every call, result row and CSV row carries its arm; the winner is promoted to the workflow's
// rule book; a rehearsal runs the experiment before any real call; and bad input changes nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { type SseClient, sse } from "../support/sse-client.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const SYSTEM_KEY = "experiments-test-system-key-0123456789"
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session
let other: Session

beforeAll(async () => {
  srv = await startTestServer({ env: { ...FAST_RUNTIME_ENV, SYSTEM_KEY } })
  a = api(srv)
  ;[s, other] = await Promise.all([funded(), a.signup({ country: "US" })])
}, 30_000)
afterAll(async () => srv?.stop())

const call = async (who: Session, method: string, path: string, body?: unknown) => {
  const res = await a.call(method, path, { token: who.token, ...(body !== undefined && { body }) })
  const text = await res.text()
  return { status: res.status, text, body: (text.startsWith("{") ? JSON.parse(text) : {}) as Json }
}

async function funded(): Promise<Session> {
  const who = await a.signup({ country: "US" })
  const intent = (await call(who, "POST", "/billing/topup", { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  return who
}

/**
 * A campaign whose calls may run the longest a rule book allows: at the suite's time scale a busy
 * audio pipeline takes about a second of real time a turn, and 300 s of call time would be 3 s.
 */
async function workflow(who: Session): Promise<Json> {
  const w = (await call(who, "POST", "/api/workflows", { nl_prompt: "Invite members to renew their plan." })).body
  expect((await call(who, "PUT", `/api/workflows/${w.id}`, { rule_book: { max_call_seconds: 1800 } })).status).toBe(200)
  return w
}

/** The control may not offer a discount; the challenger may, without asking anyone. */
const ARMS = [
  { name: "control", rule_book: { concession_policy: { allowed: false } } },
  {
    name: "discount",
    rule_book: { concession_policy: { allowed: true, cap_minor: 1000, requires_approval: false, stray: { x: 1 } } },
  },
]

describe("experiments: validation", () => {
  let w: Json
  beforeAll(async () => {
    w = await workflow(s)
  })

  it("refuses bad arms in one 422 and makes nothing", async () => {
    const cases: Array<[unknown, string]> = [
      [{ name: "x", arms: [ARMS[0]] }, "arms"],
      [{ name: "x", arms: [...ARMS, { name: "c" }, { name: "d" }, { name: "e" }] }, "arms"],
      [{ name: "x", arms: [ARMS[0], { ...ARMS[1], name: "Control" }] }, "arms.1.name"],
      [{ name: "x", arms: [ARMS[0], { name: "b", rule_book: { colour: "red" } }] }, "arms.1.rule_book.colour"],
      [{ name: "x", arms: [ARMS[0], { name: "b", rule_book: { opening_line: "" } }] }, "arms.1.rule_book.opening_line"],
      [{ name: "x", arms: [ARMS[0], { name: "b", weight: 0 }] }, "arms.1.weight"],
      [{ name: "x", arms: [ARMS[0], { name: "b", persona: "nobody" }] }, "arms.1.persona"],
      [{ name: "x", arms: [ARMS[0], { name: "b", voice: 999_999 }] }, "arms.1.voice"],
      [{ name: "", arms: ARMS }, "name"],
    ]
    for (const [body, field] of cases) {
      const r = await call(s, "POST", `/api/workflows/${w.id}/experiments`, body)
      expect(r.status, JSON.stringify(body)).toBe(422)
      expect(r.body.code).toBe("VALIDATION_FAILED")
      expect(
        r.body.errors.map((e: Json) => e.field),
        JSON.stringify(body),
      ).toContain(field)
    }
    expect((await call(s, "GET", `/api/workflows/${w.id}/experiments`)).body.data).toEqual([])
  })

  it("keeps another workspace out, allows one running experiment, and stops arms one way", async () => {
    expect((await call(other, "POST", `/api/workflows/${w.id}/experiments`, { name: "x", arms: ARMS })).status).toBe(
      404,
    )
    const e = (await call(s, "POST", `/api/workflows/${w.id}/experiments`, { name: "Offer", arms: ARMS })).body
    expect(e).toMatchObject({ name: "Offer", status: "running", promoted_arm: null })
    expect(e.arms.map((x: Json) => [x.name, x.weight, x.stopped])).toEqual([
      ["control", 1, false],
      ["discount", 1, false],
    ])
    expect(e.readout.arms.map((x: Json) => x.targets)).toEqual([0, 0])
    // An arm keeps what it changes as the validated book has it: its policy whole, nothing unknown.
    expect(e.arms[1].rule_book).toEqual({
      concession_policy: { allowed: true, cap_minor: 1000, requires_approval: false, currency: "USD" },
    })
    expect(e.readout.statement).toMatch(/no calls yet/)
    const again = await call(s, "POST", `/api/workflows/${w.id}/experiments`, { name: "y", arms: ARMS })
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("EXPERIMENT_RUNNING")
    expect((await call(other, "GET", `/api/workflows/${w.id}/experiments/${e.id}`)).status).toBe(404)
    const path = `/api/workflows/${w.id}/experiments/${e.id}`
    expect((await call(s, "PATCH", path, { arms: [{ name: "nope", stopped: true }] })).status).toBe(422)
    expect((await call(s, "PATCH", path, { status: "ended", promote: "control" })).status).toBe(422)
    const stopped = await call(s, "PATCH", path, { arms: [{ name: "discount", stopped: true }] })
    expect(stopped.status).toBe(200)
    expect(stopped.body.arms.map((x: Json) => x.stopped)).toEqual([false, true])
    const all = await call(s, "PATCH", path, { arms: [{ name: "control", stopped: true }] })
    expect(all.status).toBe(422)
    expect((await call(s, "PATCH", path, { status: "ended" })).body.status).toBe("ended")
    const late = await call(s, "PATCH", path, { status: "ended" })
    expect(late.status).toBe(409)
    expect(late.body.code).toBe("EXPERIMENT_ENDED")
  })
})

/** Enough callees for the arms to be told apart, few enough to keep the suite light beside others. */
const TARGETS = 48

describe("experiments: a two-arm run on the simulator", () => {
  let w: Json
  let e: Json
  let runId: number
  let live: SseClient

  beforeAll(async () => {
    w = await workflow(s)
    // Three discount seekers (…7) to one who agrees anyway (…3): the control agrees about a quarter of
    // the time, the discount arm nearly always.
    const rows = Array.from({ length: TARGETS }, (_, i) => ({
      phone: `+1202555${String(1000 + i * 10 + (i % 4 === 0 ? 3 : 7)).padStart(4, "0")}`,
      name: `Callee ${i}`,
    }))
    expect((await call(s, "POST", `/api/workflows/${w.id}/audience`, { rows })).status).toBeLessThan(300)
    await call(s, "PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
    e = (await call(s, "POST", `/api/workflows/${w.id}/experiments`, { name: "Discount offer", arms: ARMS })).body
    runId = (await call(s, "POST", `/api/workflows/${w.id}/run`)).body.run_id
    live = sse(`${srv.url}/api/runs/${runId}/turns/stream`, { authorization: `Bearer ${s.token}` })
    for (let t = Date.now(); Date.now() - t < 90_000; await new Promise((r) => setTimeout(r, 200)))
      if ((await srv.sql`select status from runs where id = ${runId}`)[0]!.status === "completed") return
    throw new Error(`run ${runId} did not complete`)
  }, 120_000)

  it("deals every target to one arm and keeps it there", async () => {
    const calls = await srv.sql<{ target_id: number; arm: string | null; experiment_id: number | null }[]>`
      select target_id::int, arm, experiment_id::int from calls where run_id = ${runId}`
    expect(calls.length).toBeGreaterThanOrEqual(TARGETS)
    expect(new Set(calls.map((c) => c.experiment_id))).toEqual(new Set([e.id]))
    const armOf = new Map<number, string>()
    for (const c of calls) {
      expect(armOf.get(c.target_id) ?? c.arm).toBe(c.arm)
      armOf.set(c.target_id, c.arm!)
    }
    const sizes = ["control", "discount"].map((n) => [...armOf.values()].filter((x) => x === n).length)
    // An even split by hash: neither arm under a quarter of the targets.
    for (const n of sizes) expect(n).toBeGreaterThan(TARGETS / 4)
    expect(sizes[0]! + sizes[1]!).toBe(TARGETS)
    // The dialer's decision says the arm too.
    const [d] = await srv.sql<[{ detail: Json }]>`
      select detail from dial_decisions where run_id = ${runId} and decision = 'dial' limit 1`
    expect(d.detail.experiment_id).toBe(e.id)
    expect(["control", "discount"]).toContain(d.detail.arm)
  })

  it("carries the arm on every turn, live and replayed", async () => {
    const calls = await srv.sql<{ id: number; arm: string }[]>`select id::int, arm from calls where run_id = ${runId}`
    const armOf = new Map(calls.map((c) => [c.id, c.arm]))
    const replay = sse(`${srv.url}/api/runs/${runId}/turns/stream?since_seq=0`, { authorization: `Bearer ${s.token}` })
    try {
      const [n] = await srv.sql<[{ n: number }]>`select count(*)::int as n from turns where run_id = ${runId}`
      await replay.waitFor(n.n, 10_000)
      for (const stream of [live, replay]) {
        const turns = stream.json<{ call_id: number; arm?: string }>()
        expect(turns.length).toBeGreaterThan(TARGETS)
        for (const t of turns) expect(t.arm).toBe(armOf.get(Number(t.call_id)))
      }
    } finally {
      replay.close()
      live.close()
    }
  })

  it("the arms' books are what their calls followed", async () => {
    const rows = await srv.sql<{ arm: string; outcome: string }[]>`
      select arm, outcome from calls where run_id = ${runId} and phone_e164 like '%7'`
    const concessions = (arm: string) =>
      rows.filter((r) => r.arm === arm && r.outcome === "agreed_with_concession").length
    expect(concessions("control")).toBe(0)
    // Most of the discount arm's seekers (how many the hash deals it varies) took the discount.
    const seekers = rows.filter((r) => r.arm === "discount").length
    expect(concessions("discount")).toBeGreaterThan(seekers / 2)
    const [one] = await srv.sql<[{ id: number }]>`
      select id::int from calls where run_id = ${runId} and arm = 'discount' and outcome = 'agreed_with_concession'
      limit 1`
    const view = (await call(s, "GET", `/api/calls/${one.id}`)).body
    expect(view).toMatchObject({ experiment_id: e.id, arm: "discount" })
    expect(view.transcript.map((t: Json) => t.text).join(" ")).toMatch(/discount/i)
  })

  it("reads out the better arm with an interval that excludes zero", async () => {
    const r = (await call(s, "GET", `/api/workflows/${w.id}/experiments/${e.id}`)).body.readout
    expect(r.unit).toBe("target")
    const [control, discount] = r.arms as Json[]
    expect(control!.targets + discount!.targets).toBe(TARGETS)
    expect(discount!.agreement.rate).toBeGreaterThan(control!.agreement.rate)
    expect(r.better, JSON.stringify(r.arms)).toBe("discount")
    expect(r.decided).toBe(true)
    const cmp = r.agreement.comparisons[0]
    expect(cmp).toMatchObject({ arm: "discount", control: "control", decided: true, better: "discount" })
    expect(cmp.difference.ci_low).toBeGreaterThan(0)
    expect(cmp.sequential.ci_low).toBeGreaterThan(0)
    expect(r.statement).toMatch(/^discount agrees more often: .* The data can tell them apart\.$/)
    // Each rate with its interval and count, and the arm's counts agree with the calls table.
    for (const arm of r.arms as Json[]) {
      const [n] = await srv.sql<[{ targets: number; connects: number; agreed: number }]>`
        select count(distinct target_id)::int as targets,
          count(distinct target_id) filter (where answered_at is not null)::int as connects,
          count(distinct target_id) filter (where outcome like 'agreed%')::int as agreed
        from calls where run_id = ${runId} and arm = ${arm.name}`
      expect([arm.targets, arm.connects.successes, arm.agreement.successes]).toEqual([n.targets, n.connects, n.agreed])
      expect(arm.agreement.ci_low).toBeLessThanOrEqual(arm.agreement.rate)
      expect(arm.agreement.ci_high).toBeGreaterThanOrEqual(arm.agreement.rate)
      expect(arm.cost_per_agreement_minor).toBe(Math.round(arm.cost_minor / arm.agreement.successes))
    }
  })

  it("carries the arm on every result row, JSON and CSV", async () => {
    const json = (await call(s, "GET", `/api/runs/${runId}/results?limit=100`)).body.results as Json[]
    expect(json).toHaveLength(TARGETS)
    const [calls] = [
      await srv.sql<{ target_id: number; arm: string }[]>`
      select distinct target_id::int, arm from calls where run_id = ${runId}`,
    ]
    const armOf = new Map(calls.map((c) => [c.target_id, c.arm]))
    for (const r of json) expect(r.arm).toBe(armOf.get(r.target_id))
    const csv = (await call(s, "GET", `/api/runs/${runId}/results?format=csv`)).text.trim().split(/\r?\n/)
    const header = csv[0]!.split(",")
    const col = header.indexOf("arm")
    expect(col, csv[0]).toBeGreaterThan(0)
    expect(
      csv
        .slice(1)
        .map((line) => line.split(",")[col])
        .sort(),
    ).toEqual(json.map((r) => r.arm).sort())
  })

  it("promotes the winner to the workflow's rule book, once", async () => {
    const path = `/api/workflows/${w.id}/experiments/${e.id}`
    const before = (await call(s, "GET", `/api/workflows/${w.id}`)).body
    expect(before.rule_book.concession_policy.allowed).not.toBe(true)
    expect((await call(other, "PATCH", path, { promote: "discount" })).status).toBe(404)
    // A rule-book change, as PUT is: refused while the workflow is live.
    const live = await call(s, "PATCH", path, { promote: "discount" })
    expect([live.status, live.body.code]).toEqual([409, "WORKFLOW_LIVE"])
    expect((await call(s, "POST", `/api/workflows/${w.id}/pause`)).status).toBe(200)
    const promoted = await call(s, "PATCH", path, { promote: "discount" })
    expect(promoted.status, promoted.text).toBe(200)
    expect(promoted.body).toMatchObject({ status: "ended", promoted_arm: "discount" })
    const after = (await call(s, "GET", `/api/workflows/${w.id}`)).body
    expect(after.rule_book_version).toBe(before.rule_book_version + 1)
    expect(after.rule_book_id).toBe(promoted.body.promoted_rule_book_id)
    expect(after.rule_book.concession_policy).toMatchObject({
      allowed: true,
      cap_minor: 1000,
      requires_approval: false,
    })
    expect(after.rule_book.opening_line).toBe(before.rule_book.opening_line)
    const again = await call(s, "PATCH", path, { promote: "control" })
    expect(again.status).toBe(409)
    expect((await call(s, "GET", `/api/workflows/${w.id}`)).body.rule_book_version).toBe(after.rule_book_version)
  })
})

describe("experiments: rehearsed before any real call", () => {
  it("runs the experiment on a simulation campaign's callees", async () => {
    const w = await workflow(s)
    const e = (await call(s, "POST", `/api/workflows/${w.id}/experiments`, { name: "Rehearsed", arms: ARMS })).body
    const bad = await call(s, "POST", "/api/sim/campaigns", { workflow_id: w.id, experiment_id: e.id + 1000 })
    expect(bad.status).toBe(422)
    const c = (
      await call(s, "POST", "/api/sim/campaigns", {
        workflow_id: w.id,
        experiment_id: e.id,
        size: 24,
        batch_size: 24,
        time_scale: 0.01,
        mix: { "wants-discount": 1 },
      })
    ).body
    expect(c, JSON.stringify(c)).toHaveProperty("experiment")
    expect(c.experiment).toMatchObject({ rehearses: e.id, name: "Rehearsed", seed: e.seed })
    expect((await call(s, "POST", `/api/sim/campaigns/${c.id}/run-batch`)).status).toBe(202)
    await expect
      .poll(async () => (await call(s, "GET", `/api/sim/campaigns/${c.id}`)).body.progress.done, { timeout: 60_000 })
      .toBe(24)
    const view = (await call(s, "GET", `/api/sim/campaigns/${c.id}`)).body
    const [control, discount] = view.experiment.readout.arms as Json[]
    expect(control!.targets + discount!.targets).toBe(24)
    expect(control!.agreement.successes).toBe(0)
    expect(discount!.agreement.successes).toBe(discount!.connects.successes)
    // The workflow's own experiment saw no call: a rehearsal is not the campaign.
    const own = (await call(s, "GET", `/api/workflows/${w.id}/experiments/${e.id}`)).body
    expect(own.readout.arms.map((x: Json) => x.targets)).toEqual([0, 0])
  }, 90_000)
})

describe("experiments: an arm stopped while the campaign runs", () => {
  it("takes no more calls once stopped: a dialing run hears of it at once", async () => {
    const u = await funded()
    // Two calls at a time, so most of the audience is still to call when the arm is stopped.
    const limits = await a.call("PUT", "/api/internal/dial-limits", {
      headers: { "x-system-key": SYSTEM_KEY, "x-tenant-id": String(u.tenantId) },
      body: { calls_per_second: null, max_concurrent_calls: null, max_concurrent_per_workflow: 2 },
    })
    expect(limits.status).toBe(200)
    const w = await workflow(u)
    const rows = Array.from({ length: 24 }, (_, i) => ({ phone: `+1202556${String(1003 + i * 10).padStart(4, "0")}` }))
    expect((await call(u, "POST", `/api/workflows/${w.id}/audience`, { rows })).status).toBeLessThan(300)
    await call(u, "PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
    const e = (await call(u, "POST", `/api/workflows/${w.id}/experiments`, { name: "Stop one", arms: ARMS })).body
    const runId = (await call(u, "POST", `/api/workflows/${w.id}/run`)).body.run_id
    const callsOf = () =>
      srv.sql<{ arm: string; started_at: Date }[]>`select arm, started_at from calls where run_id = ${runId}`
    // Until the discount arm has taken a call (each target's arm is a hash: most of the audience is left).
    for (let t = Date.now(); !(await callsOf()).some((c) => c.arm === "discount"); await sleep(20))
      if (Date.now() - t > 30_000) throw new Error("no call placed in the discount arm")
    const path = `/api/workflows/${w.id}/experiments/${e.id}`
    expect((await call(u, "PATCH", path, { arms: [{ name: "discount", stopped: true }] })).status).toBe(200)
    // The bus carries the change to the run's driver; calls placed from a moment after follow it.
    const stoppedAt = Date.now() + 200
    for (let t = Date.now(); ; await sleep(200)) {
      if ((await srv.sql`select status from runs where id = ${runId}`)[0]!.status === "completed") break
      if (Date.now() - t > 90_000) throw new Error(`run ${runId} did not complete`)
    }
    const calls = await callsOf()
    const after = calls.filter((c) => c.started_at.getTime() > stoppedAt)
    expect(after.length).toBeGreaterThan(5)
    expect(new Set(after.map((c) => c.arm))).toEqual(new Set(["control"]))
    // Before, both arms took calls.
    expect(new Set(calls.map((c) => c.arm))).toEqual(new Set(["control", "discount"]))
  }, 120_000)
})
