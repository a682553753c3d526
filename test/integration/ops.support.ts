// What the hand-over and fault suites share: a funded workspace with a running campaign, the
// exactly-once checks on what a run left in Postgres, and reading /healthz.
import { randomBytes } from "node:crypto"
import { expect } from "vitest"
import type { Sql } from "../../src/platform/Db.js"
import type { SpawnedServer } from "../support/harness.js"
import { call, type Json, until, verifyEmail } from "../support/processes.js"

export interface Campaign {
  readonly token: string
  readonly workflowId: number
  readonly runId: number
}

/**
 * Signs a workspace up, funds it and starts a run on `targets` numbers whose last digit is 3–6:
 * each ends in a final outcome on its first attempt, so "dialed once" is exact.
 */
export async function startCampaign(base: string, dataDir: string, targets: number): Promise<Campaign> {
  const email = `ops-${randomBytes(4).toString("hex")}@example.com`
  const password = "correct horse battery"
  expect((await call(base, "POST", "/auth/signup", { body: { email, password, country: "US" } })).status).toBe(201)
  await verifyEmail(base, dataDir, email)
  const token = (await call(base, "POST", "/auth/login", { body: { email, password } })).body.token as string
  const intent = (await call(base, "POST", "/billing/topup", { token, body: { amount_minor: 5_000_000 } })).body
  const paid = await call(base, "POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(paid.status).toBe(200)
  const rows = Array.from({ length: targets }, (_, i) => ({
    phone: `+1202555${String(1000 + i * 10 + 3 + (i % 4)).padStart(4, "0")}`,
    name: `Callee ${i}`,
  }))
  const w = (
    await call(base, "POST", "/api/workflows", {
      token,
      body: { nl_prompt: "Call our members and invite them to renew their plan." },
    })
  ).body
  const audience = await call(base, "POST", `/api/workflows/${w.id}/audience`, { token, body: { rows } })
  expect(audience.body.accepted).toBe(targets)
  const compliance = await call(base, "PUT", `/api/workflows/${w.id}/compliance`, {
    token,
    body: { consent_attestation_text: "Opted in." },
  })
  expect(compliance.status).toBe(200)
  const started = await call(base, "POST", `/api/workflows/${w.id}/run`, { token })
  expect(started.status).toBe(201)
  return { token, workflowId: w.id as number, runId: started.body.run_id as number }
}

/** Waits for the run to reach `completed` (polling the api at `base()`, which may change). */
export async function runCompleted(base: () => string, c: Campaign, timeoutMs: number): Promise<Json> {
  return until(
    "the run to complete",
    async () => {
      const r = await call(base(), "GET", `/api/workflows/${c.workflowId}/runs`, { token: c.token }).catch(
        () => undefined,
      )
      const run = (r?.body.runs as Json[] | undefined)?.find((x) => x.id === c.runId)
      return run?.status === "completed" ? run : undefined
    },
    timeoutMs,
  )
}

/**
 * What a finished run must leave: every target dialed exactly once and done, every call ended and
 * charged exactly once (one reservation at most, released or settled once), no dial slot held.
 */
export async function expectExactlyOnce(sql: Sql, runId: number, targets: number): Promise<void> {
  const perTarget = await sql<{ run_target_id: number; n: number }[]>`
    select run_target_id, count(*)::int as n from calls where run_id = ${runId} group by run_target_id`
  expect(perTarget).toHaveLength(targets)
  for (const t of perTarget) expect(t.n, `target ${t.run_target_id}`).toBe(1)
  const unfinished = await sql`select 1 from run_targets where run_id = ${runId} and status <> 'done'`
  expect(unfinished).toHaveLength(0)
  const calls = await sql<{ id: number; status: string; answered_at: Date | null }[]>`
    select id, status, answered_at from calls where run_id = ${runId}`
  for (const c of calls) {
    expect(c.status, `call ${c.id}`).toBe("ended")
    const entries = await sql<{ kind: string }[]>`select kind from ledger_entries where reference = ${`call:${c.id}`}`
    const reservations = entries.filter((e) => e.kind === "call_reservation").length
    expect(reservations, `call ${c.id}`).toBeLessThanOrEqual(1)
    if (c.answered_at !== null) expect(reservations, `call ${c.id}`).toBe(1)
    expect(entries.filter((e) => e.kind === "call_release").length, `call ${c.id}`).toBeLessThanOrEqual(reservations)
    const [res] = await sql<[{ status: string }?]>`
      select status from usage_reservations where call_ref = ${`call:${c.id}`}`
    expect(res?.status, `call ${c.id}`).not.toBe("reserved")
  }
  // Turns: one row per (call, turn index), and the run's seqs unique.
  const dupTurns = await sql`select call_id, turn_index from turns where run_id = ${runId}
    group by call_id, turn_index having count(*) > 1`
  expect(dupTurns).toHaveLength(0)
  const dupSeqs = await sql`select seq from turns where run_id = ${runId} group by seq having count(*) > 1`
  expect(dupSeqs).toHaveLength(0)
}

/** The instance id a spawned process logged at start. */
export const instanceOf = (p: SpawnedServer): unknown =>
  p.lines.find((l) => l["msg"] === "runtime host started" || l["msg"] === "parley started")?.["instance"]

/** GET /healthz: its status code and body (status 0 when the process does not answer). */
export async function health(base: string): Promise<{ status: number; body: Json }> {
  try {
    const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(5_000) })
    return { status: res.status, body: (await res.json()) as Json }
  } catch {
    return { status: 0, body: {} }
  }
}
