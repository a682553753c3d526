// A simulation campaign laid out in SQL as src/rehearsals/ lays it out (migrations/0019): a hidden workflow
// rehearsing a real one, its simulated audience, and one running run whose targets are held
// ('infinity') until released. The runtime's tests drive a rehearsal with it, API or not.
import { Bus } from "../../src/platform/Bus.js"
import type { Sql } from "../../src/platform/Db.js"
import { RT_RUN_CONTROL, RT_RUN_WAKE, type RunControl } from "../../src/platform/subjects.js"
import type { TestServer } from "../support/harness.js"

export interface SqlCampaign {
  readonly campaignId: number
  readonly simWorkflowId: number
  readonly runId: number
  /** The simulated callees' numbers, in run-target (release) order. */
  readonly phones: string[]
}

/** A synthetic number whose last digit selects the sim callee's behaviour (SIM_CALLEE_BY_DIGIT). */
export const simNumber = (index: number, digit: number): string =>
  `+1202555${String(index % 1000).padStart(3, "0")}${digit}`

/** A campaign of `digits.length` simulated callees rehearsing `workflowId`, every one held. */
export async function campaignInSql(
  sql: Sql,
  o: {
    tenantId: number
    workflowId: number
    digits: number[]
    timeScale: number | null
    /** Offsets the numbers, so campaigns of one workspace never share one. */
    first?: number
    /** The hidden workflow's schedule (default: the rehearsed workflow's). */
    schedule?: { kind: "immediate" | "window" | "once"; body: Record<string, unknown> }
  },
): Promise<SqlCampaign> {
  const phones = o.digits.map((d, i) => simNumber((o.first ?? 0) + i, d))
  return (await sql.begin(async (tx) => {
    const [w] = await tx<[{ id: number }]>`
      insert into workflows (kind, tenant_id, name, status, persona, schedule_kind, schedule, rule_book_id, nl_prompt,
        persona_id, voice_avatar_id, simulation_of)
      select 'rehearsal', tenant_id, left('Simulation of ' || name, 200), 'live', persona, schedule_kind, schedule,
        rule_book_id, nl_prompt, persona_id, voice_avatar_id, id
      from workflows where id = ${o.workflowId} and tenant_id = ${o.tenantId}
      returning id::int as id`
    if (o.schedule !== undefined)
      await tx`update workflows set schedule_kind = ${o.schedule.kind}, schedule = ${tx.json(o.schedule.body as never)}
        where id = ${w.id}`
    const [run] = await tx<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, rule_book_id, status, targets_total, targets_queued)
      select tenant_id, id, rule_book_id, 'running', ${phones.length}, ${phones.length} from workflows
      where id = ${w.id}
      returning id::int as id`
    const [c] = await tx<[{ id: number }]>`
      insert into sim_campaigns (tenant_id, workflow_id, sim_workflow_id, run_id, state, size, batch_size, seed,
        time_scale, mix)
      values (${o.tenantId}, ${o.workflowId}, ${w.id}, ${run.id}, 'ready', ${phones.length},
        ${Math.min(100, phones.length)}, 1, ${o.timeScale}, ${tx.json({})})
      returning id::int as id`
    for (const [i, phone] of phones.entries()) {
      const [t] = await tx<[{ id: number }]>`
        insert into audience_targets (tenant_id, workflow_id, phone_e164, name)
        values (${o.tenantId}, ${w.id}, ${phone}, ${`Sim ${i + 1}`}) returning id`
      await tx`insert into run_targets (tenant_id, run_id, target_id, phone_e164, next_attempt_at)
        values (${o.tenantId}, ${run.id}, ${t.id}, ${phone}, 'infinity')`
    }
    return { campaignId: c.id, simWorkflowId: w.id, runId: run.id, phones }
  })) as SqlCampaign
}

/** Releases the next `n` held targets (in id order), as POST …/run-batch does; returns how many. */
export async function release(sql: Sql, runId: number, n: number): Promise<number> {
  const rows = await sql`
    update run_targets set next_attempt_at = now(), updated_at = now()
    where id in (select id from run_targets where run_id = ${runId} and next_attempt_at = 'infinity'
      and status in ('queued', 'waiting') order by id limit ${n})
    returning id`
  return rows.count
}

/** What run-batch publishes: the owner looks for due targets again, and an unowned run is claimed. */
export async function wake(srv: TestServer, tenantId: number, runId: number): Promise<void> {
  const bus = await srv.running.runtime.runPromise(Bus)
  const control: RunControl = { run_id: runId, tenant_id: tenantId, command: "resume" }
  bus.publish(RT_RUN_CONTROL, control)
  bus.publish(RT_RUN_WAKE, control)
}

export interface TargetRow {
  readonly phone_e164: string
  readonly status: string
  readonly attempts: number
  readonly outcome: string | null
}

export const targetsOf = (sql: Sql, runId: number) =>
  sql<TargetRow[]>`select phone_e164, status, attempts, outcome from run_targets where run_id = ${runId} order by id`

/** Polls `probe` every 50 ms until it returns something other than undefined. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await probe()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** The run's status from Postgres. */
export const runStatus = async (sql: Sql, runId: number): Promise<string> =>
  (await sql<[{ status: string }]>`select status from runs where id = ${runId}`)[0].status
