// Helpers of the feedback, learning and rollup suites: a workspace with a workflow (its rule book
// written by the simulator), an audience and a finished run whose turns come in through
// POST /internal/turns, and verdicts given through the API.
import { fillPlaceholders } from "../../src/providers/llm/llm.interface.js"
import { findVoice } from "../../src/voices/voices.catalog.js"
import { api, type Session, SYSTEM_KEY } from "../support/clients.js"
import type { TestServer } from "../support/harness.js"

export type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Handler {
  category: string
  trigger: string
  response: string
}

export interface Campaign {
  readonly s: Session
  readonly workflowId: number
  readonly runId: number
  /** Audience target ids, by callee name. */
  readonly targets: Map<string, number>
  readonly handlers: Handler[]
  readonly agentName: string
  readonly company: string
  /** A line as the call to `name` said it. */
  fill(text: string, name: string | null): string
}

export function kbClient(srv: TestServer) {
  const a = api(srv)
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await a.call(method, path, { token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }

  /** A workflow with an audience and a (finished) run row, no runtime involved. */
  async function campaign(s: Session, names: string[] = ["Asha Rao", "Ben"]): Promise<Campaign> {
    const w = (await call("POST", "/api/workflows", s.token, { nl_prompt: "Call lapsed members about renewing." })).body
    const aud = await call("POST", `/api/workflows/${w.id}/audience`, s.token, {
      rows: names.map((name, i) => ({ phone: `+1202555${String(1000 + i)}`, name })),
    })
    if (aud.status !== 200) throw new Error(`audience ${aud.status}: ${JSON.stringify(aud.body)}`)
    const rows = await srv.sql<Array<{ id: number; name: string }>>`
      select id, name from audience_targets where workflow_id = ${w.id} order by id`
    const [run] = await srv.sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, status) values (${s.tenantId}, ${w.id}, 'completed') returning id`
    const [tenant] = await srv.sql<[{ name: string }]>`select name from tenants where id = ${s.tenantId}`
    const book = w.rule_book as { persona: string; objection_handlers: Handler[] }
    const agentName = findVoice(book.persona)?.name ?? "Alex"
    return {
      s,
      workflowId: w.id,
      runId: run!.id,
      targets: new Map(rows.map((r) => [r.name, r.id])),
      handlers: book.objection_handlers,
      agentName,
      company: tenant!.name,
      fill: (text, name) => fillPlaceholders(text, { name, agentName, company: tenant!.name }),
    }
  }

  let seq = 0
  /** Stores a turn of `c`'s run for the callee `name`; its id. */
  async function turn(c: Campaign, name: string, speaker: "agent" | "callee" | "system", text: string) {
    const res = await fetch(`${srv.url}/internal/turns`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(c.s.tenantId) },
      body: JSON.stringify({ run_id: c.runId, target_id: c.targets.get(name), seq: seq++, speaker, text }),
    })
    const body = (await res.json()) as Json
    if (res.status !== 201) throw new Error(`turn ${res.status}: ${JSON.stringify(body)}`)
    return body.turn_id as number
  }

  const give = (token: string, turn_id: unknown, verdict: unknown, note?: unknown) =>
    call("POST", "/kb/feedback", token, { turn_id, verdict, ...(note !== undefined && { note }) })

  /** Write-scoped API keys: each is another reviewer of the same workspace. */
  async function reviewers(s: Session, n: number): Promise<string[]> {
    const out: string[] = []
    for (let i = 0; i < n; i++) out.push((await a.createKey(s, { name: `reviewer ${i}`, scope: "write" })).secret)
    return out
  }

  return { a, call, campaign, turn, give, reviewers }
}
