// A run speaks as the workflow's persona: through the real server and its in-process runtime with
// the sim carrier, the first agent turn opens with the persona's greeting in its agent's name; a
// knowledge-base opening rule still wins over the greeting; without an agent_name, the persona's
// catalogue voice names the agent; with no persona, the rule book's persona speaks as before.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { findVoice } from "../../src/voices/voices.catalog.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session
let company: string
beforeAll(async () => {
  srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
  a = api(srv)
  s = await a.signup({ country: "US" })
  const intent = (await call("POST", "/billing/topup", { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  company = (await srv.sql<[{ name: string }]>`select name from tenants where id = ${s.tenantId}`)[0].name
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(method: string, path: string, body?: unknown) {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

/** A ready workflow whose one callee (last digit 3) answers and agrees. */
async function readyWorkflow(phone: string): Promise<Json> {
  const w = (await call("POST", "/api/workflows", { nl_prompt: "Call members about renewing their plan." })).body
  expect((await call("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone, name: "Dana" }] })).status).toBe(200)
  const att = await call("PUT", `/api/workflows/${w.id}/compliance`, {
    consent_attestation_text: "All numbers opted in on our website.",
  })
  expect(att.status).toBe(200)
  return w
}

/** Runs the workflow to completion and returns its first agent turn. */
async function firstAgentTurn(workflowId: number): Promise<string> {
  const started = await call("POST", `/api/workflows/${workflowId}/run`)
  expect(started.status, JSON.stringify(started.body)).toBe(201)
  const runId = started.body.run_id as number
  const deadline = Date.now() + 20_000
  for (;;) {
    const runs = (await call("GET", `/api/workflows/${workflowId}/runs`)).body.runs as Json[]
    if (runs.find((r) => r.id === runId)?.status === "completed") break
    if (Date.now() > deadline) throw new Error(`run ${runId} did not complete`)
    await new Promise((r) => setTimeout(r, 100))
  }
  const [turn] = await srv.sql<[{ text: string }?]>`
    select text from turns where run_id = ${runId} and speaker = 'agent' order by seq limit 1`
  expect(turn).toBeDefined()
  return turn!.text
}

describe("a run speaks as the workflow's persona", () => {
  it("opens with the persona's greeting, in its agent's name", async () => {
    const w = await readyWorkflow("+12025550113")
    const p = await call("POST", "/api/personas", {
      name: "Renewals desk",
      voice: "anya",
      agent_name: "Zara",
      greeting: "Hi {name}, {agent_name} here from {company} with a quick question about your plan.",
    })
    expect(p.status).toBe(201)
    expect((await call("PUT", "/api/personas/assign", { workflow_id: w.id, persona_id: p.body.id })).status).toBe(200)
    const text = await firstAgentTurn(w.id)
    expect(text).toContain(`Hi Dana, Zara here from ${company} with a quick question about your plan.`)
    // The rule book's own opening line and persona are not what the callee heard.
    expect(text).not.toContain(w.rule_book.opening_line.replace("{name}", "Dana").slice(0, 20))
    expect(text).not.toContain(findVoice(w.rule_book.persona)!.name)
  })

  it("lets a knowledge-base opening rule win over the greeting, still in the persona's agent name", async () => {
    const w = await readyWorkflow("+12025550123")
    const p = await call("POST", "/api/personas", {
      name: "Overridden",
      voice: "kai",
      agent_name: "Milo",
      greeting: "Good day {name}, persona greeting here.",
    })
    await call("PUT", "/api/personas/assign", { workflow_id: w.id, persona_id: p.body.id })
    const rule = await call("POST", "/kb/rules", {
      bucket: "opening",
      title: "Opening for renewals",
      body: "Hello {name}, it's {agent_name} from {company} about your renewal.",
      workflow_id: w.id,
    })
    expect(rule.status).toBe(201)
    const text = await firstAgentTurn(w.id)
    expect(text).toContain(`Hello Dana, it's Milo from ${company} about your renewal.`)
    expect(text).not.toContain("persona greeting here")
  })

  it("names the agent after its catalogue voice without agent_name; without a greeting the book's opens", async () => {
    const w = await readyWorkflow("+12025550133")
    const p = await call("POST", "/api/personas", { name: "Plain", voice: "kai" })
    await call("PUT", "/api/personas/assign", { workflow_id: w.id, persona_id: p.body.id })
    const text = await firstAgentTurn(w.id)
    const opening = (w.rule_book.opening_line as string)
      .replaceAll("{name}", "Dana")
      .replaceAll("{agent_name}", "Kai")
      .replaceAll("{company}", company)
    expect(text).toContain(opening)
  })

  it("with no persona assigned, the rule book's persona speaks as before", async () => {
    const w = await readyWorkflow("+12025550143")
    const text = await firstAgentTurn(w.id)
    const name = findVoice(w.rule_book.persona)!.name
    const opening = (w.rule_book.opening_line as string)
      .replaceAll("{name}", "Dana")
      .replaceAll("{agent_name}", name)
      .replaceAll("{company}", company)
    expect(text).toContain(opening)
  })
})
