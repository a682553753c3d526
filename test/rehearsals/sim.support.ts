// Shared by the simulation-campaign suites: a server whose runtime claims a run only when woken,
// campaigns whose run is held by "another process" (so nothing dials here), and SQL that plays the
// runtime's part (dial, ask a question, settle outcomes) for the reconciliation to read.
import { expect } from "vitest"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

export type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/** The periodic claim waits a minute: a campaign's run is claimed only by the wake-up of run-batch. */
export const SIM_API_ENV = { RUN_CLAIM_INTERVAL_MS: "60000" }

export async function simServer() {
  const srv = await startTestServer({ env: SIM_API_ENV })
  const a = api(srv)
  const call = async (method: string, path: string, s: { token: string } | string, body?: unknown) => {
    const token = typeof s === "string" ? s : s.token
    const res = await a.call(method, path, { token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }
  return { srv, a, call, ...runtimeStandIn(srv) }
}

export type SimServer = Awaited<ReturnType<typeof simServer>>

/** A workflow with a generated (valid) rule book; no audience, no attestation. */
export async function workflow(h: SimServer, s: Session): Promise<Json> {
  const w = await h.call("POST", "/api/workflows", s, {
    nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
  })
  expect(w.status).toBe(201)
  return w.body
}

/** Creates a campaign (201 expected) and hands its run to a process that is not this one. */
export async function campaign(h: SimServer, s: Session, body: Json): Promise<Json> {
  const res = await h.call("POST", "/api/sim/campaigns", s, body)
  if (res.status !== 201) throw new Error(`create ${res.status}: ${JSON.stringify(res.body)}`)
  await h.holdRun(res.body.run_id)
  return res.body
}

function runtimeStandIn(srv: TestServer) {
  const sql = srv.sql
  return {
    /** Another runtime process owns the run for a day: the in-process runtime never dials it. */
    async holdRun(runId: number) {
      await sql`update runs set owner_instance = 'elsewhere', lease_expires_at = now() + interval '1 day'
        where id = ${runId}`
    },
    /** Begins an attempt on the next `n` released targets (as the dialer would); returns their calls. */
    async dial(runId: number, n: number) {
      const targets = await sql<{ id: number; target_id: number; phone_e164: string; tenant_id: number }[]>`
        update run_targets set status = 'dialing', attempts = attempts + 1
        where id in (select id from run_targets where run_id = ${runId} and status = 'queued'
          and next_attempt_at <> 'infinity' order by id limit ${n})
        returning id, target_id, phone_e164, tenant_id`
      const calls: { callId: number; runTargetId: number; phone: string }[] = []
      for (const t of targets.sort((x, y) => x.id - y.id)) {
        const [c] = await sql<[{ id: number }]>`
          insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
            owner_instance, status, answered_at)
          select ${t.tenant_id}, ${runId}, r.workflow_id, ${t.id}, ${t.target_id}, 1, ${t.phone_e164}, 'sim',
            'elsewhere', 'connected', now()
          from runs r where r.id = ${runId}
          returning id`
        calls.push({ callId: c.id, runTargetId: t.id, phone: t.phone_e164 })
      }
      return calls
    },
    /** A held conversation's question (a pending approval of its call). */
    async ask(runId: number, callId: number, action = "concession", valueMinor: number | null = 1_500) {
      const [row] = await sql<[{ id: number }]>`
        insert into approvals (tenant_id, workflow_id, run_id, call_id, target_phone, proposed_action,
          proposed_value_minor, currency, rationale, expires_at)
        select c.tenant_id, c.workflow_id, ${runId}, c.id, c.phone_e164, ${action}, ${valueMinor}, 'USD',
          'The callee asked for a discount.', now() + interval '1 hour'
        from calls c where c.id = ${callId}
        returning id`
      return row.id
    },
    /** Ends every attempt in flight with `outcome` and `seconds` of talk; their targets are final. */
    async settle(runId: number, outcome: string, seconds = 60) {
      await sql`update calls set status = 'ended', outcome = ${outcome}, connected_seconds = ${seconds},
        ended_at = now() where run_id = ${runId} and status <> 'ended'`
      await sql`update run_targets set status = 'done', outcome = ${outcome} where run_id = ${runId}
        and status = 'dialing'`
    },
    /** Dials every released target and settles them all with `outcome`. */
    async settleReleased(this: void, runId: number, outcome: string, seconds = 60) {
      const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from run_targets where run_id = ${runId}`
      await runtimeStandIn(srv).dial(runId, n)
      await runtimeStandIn(srv).settle(runId, outcome, seconds)
    },
    async runTargets(runId: number) {
      return sql<{ id: number; status: string; held: boolean; phone_e164: string }[]>`
        select id, status, next_attempt_at = 'infinity' as held, phone_e164 from run_targets
        where run_id = ${runId} order by id`
    },
  }
}
