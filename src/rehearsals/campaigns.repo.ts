// SQL of simulation campaigns (migrations/0019): the only writer of sim_campaigns, and the reads a
// campaign's status is made of from its run's approvals and calls. The hidden workflow, its
// audience, run and targets are written by their own repositories.

import type { SimCampaignState } from "../../machines/sim-campaign.machine.js"
import { effectiveApprovalStatus } from "../approvals/approvals.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { SimMix } from "./mix.js"

export interface CampaignRow {
  readonly id: number
  readonly tenant_id: number
  readonly workflow_id: number
  readonly sim_workflow_id: number
  readonly run_id: number
  readonly state: SimCampaignState
  readonly size: number
  readonly batch_size: number
  readonly seed: number
  readonly time_scale: number | null
  readonly mix: SimMix
  readonly released: number
  readonly failure: string | null
  readonly created_at: Date
  readonly updated_at: Date
  readonly ended_at: Date | null
}

const columns = (sql: Sql | Tx) => sql`
  id, tenant_id, workflow_id, sim_workflow_id, run_id, state, size, batch_size, seed, time_scale, mix, released,
  failure, created_at, updated_at, ended_at`

/** Serialises the workspace's campaign creations and resumptions, so the active limit holds. */
export const lockTenantCampaigns = async (tx: Tx, tenantId: number): Promise<void> => {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`sim_campaigns:${tenantId}`}, 0))`
}

export const countActive = async (tx: Tx, tenantId: number): Promise<number> => {
  const [row] = await tx<[{ n: number }]>`
    select count(*)::int as n from sim_campaigns
    where tenant_id = ${tenantId} and state in ('ready', 'running', 'awaiting_answer')`
  return row.n
}

export const insertCampaign = async (
  tx: Tx,
  c: {
    tenantId: number
    workflowId: number
    simWorkflowId: number
    runId: number
    size: number
    batchSize: number
    seed: number
    timeScale: number | null
    mix: SimMix
  },
): Promise<CampaignRow> => {
  const [row] = await tx<[CampaignRow]>`
    insert into sim_campaigns (tenant_id, workflow_id, sim_workflow_id, run_id, state, size, batch_size, seed,
      time_scale, mix)
    values (${c.tenantId}, ${c.workflowId}, ${c.simWorkflowId}, ${c.runId}, 'ready', ${c.size}, ${c.batchSize},
      ${c.seed}, ${c.timeScale}, ${tx.json(c.mix as never)})
    returning ${columns(tx)}`
  return row
}

/** The campaign, locked until the transaction ends: every state change is decided under it. */
export const lockCampaign = async (tx: Tx, tenantId: number, id: number): Promise<CampaignRow | undefined> => {
  const [row] = await tx<[CampaignRow?]>`
    select ${columns(tx)} from sim_campaigns where id = ${id} and tenant_id = ${tenantId} for update`
  return row
}

/** The workspace's campaigns, newest first. */
export const listCampaigns = (sql: Sql, tenantId: number, limit: number, beforeId: number | undefined) =>
  sql<{ id: number }[]>`
    select id from sim_campaigns
    where tenant_id = ${tenantId} ${beforeId === undefined ? sql`` : sql`and id < ${beforeId}`}
    order by id desc limit ${limit}`

/** Records the campaign's state and counters (updated_at moves only when something changed). */
export const saveCampaign = async (
  tx: Tx,
  id: number,
  s: { state: SimCampaignState; released: number; failure: string | null },
): Promise<CampaignRow> => {
  const final = s.state === "completed" || s.state === "failed"
  const [row] = await tx<[CampaignRow]>`
    update sim_campaigns set state = ${s.state}, released = ${s.released}, failure = ${s.failure},
      updated_at = case when (state, released, failure) is distinct from (${s.state}, ${s.released}::int, ${s.failure})
        then now() else updated_at end,
      ended_at = case when ${final} then coalesce(ended_at, now()) else ended_at end
    where id = ${id}
    returning ${columns(tx)}`
  return row
}

// --- what the campaign's run has done (reads of approvals and calls) -------------------------

export interface QuestionRow {
  readonly id: number
  readonly call_id: number | null
  readonly target_phone: string | null
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly currency: Currency
  readonly rationale: string | null
  readonly created_at: Date
  readonly expires_at: Date
}

/**
 * The run's pending approvals whose conversation is still held on them, oldest first: the
 * campaign's questions. One whose call has ended (its hold ran out) no longer holds anything.
 */
export const heldQuestions = (sql: Sql | Tx, runId: number) =>
  sql<QuestionRow[]>`
    select a.id, a.call_id, a.target_phone, a.proposed_action, a.proposed_value_minor, a.currency, a.rationale,
      a.created_at, a.expires_at
    from approvals a join calls c on c.id = a.call_id
    where a.run_id = ${runId} and ${effectiveApprovalStatus(sql, "a")} = 'pending' and c.status <> 'ended'
    order by a.id`

export interface RunStats {
  readonly approvals_asked: number
  readonly approvals_approved: number
  readonly approvals_denied: number
  readonly approvals_expired: number
  readonly approvals_pending: number
  /** final targets whose conversation asked a human at least once */
  readonly final_with_approval: number
  /** connected seconds summed over the calls of final targets */
  readonly final_talk_seconds: number
  /** calls a person or machine answered that have ended, and their connected seconds in all */
  readonly talked_calls: number
  readonly talk_seconds: number
}

export const runStats = async (sql: Sql | Tx, runId: number): Promise<RunStats> => {
  const [row] = await sql<[RunStats]>`
    select
      (select count(*) from approvals a where a.run_id = ${runId})::int as approvals_asked,
      (select count(*) from approvals a where a.run_id = ${runId} and a.status = 'approved')::int
        as approvals_approved,
      (select count(*) from approvals a where a.run_id = ${runId} and a.status = 'denied')::int as approvals_denied,
      (select count(*) from approvals a where a.run_id = ${runId}
        and ${effectiveApprovalStatus(sql, "a")} = 'expired')::int as approvals_expired,
      (select count(*) from approvals a where a.run_id = ${runId}
        and ${effectiveApprovalStatus(sql, "a")} = 'pending')::int as approvals_pending,
      (select count(distinct c.run_target_id) from approvals a
        join calls c on c.id = a.call_id
        join run_targets t on t.id = c.run_target_id
        where a.run_id = ${runId} and t.status in ('done', 'skipped'))::int as final_with_approval,
      (select coalesce(sum(c.connected_seconds), 0) from calls c join run_targets t on t.id = c.run_target_id
        where c.run_id = ${runId} and t.status in ('done', 'skipped'))::int as final_talk_seconds,
      (select count(*) from calls c where c.run_id = ${runId} and c.status = 'ended'
        and coalesce(c.connected_seconds, 0) > 0)::int as talked_calls,
      (select coalesce(sum(c.connected_seconds), 0) from calls c where c.run_id = ${runId} and c.status = 'ended'
        and coalesce(c.connected_seconds, 0) > 0)::int as talk_seconds`
  return row
}

/** Whether an approval (any status) was raised by the campaign's run. */
export const isQuestionOfRun = async (sql: Sql | Tx, runId: number, approvalId: number): Promise<boolean> => {
  const [row] = await sql`select 1 from approvals where id = ${approvalId} and run_id = ${runId}`
  return row !== undefined
}

/** The workspace's currency: the forecast's cost is in it. */
export const tenantCurrency = async (sql: Sql | Tx, tenantId: number): Promise<Currency> => {
  const [row] = await sql<[{ currency: Currency }]>`select currency from tenants where id = ${tenantId}`
  return row.currency
}
