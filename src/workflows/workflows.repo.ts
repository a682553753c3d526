// SQL for workflows and their rule-book versions (migrations/0004). Every query is scoped by
// tenant; functions that must share a transaction take its handle.

import type { Sql, Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import type { ListPage } from "../platform/page.cursor.js"
import type { RuleBook } from "./rulebook.schema.js"
import type { Schedule, ScheduleKind, WorkflowStatus } from "./workflow.schema.js"

/**
 * What a workflow is for (migrations/0045): a workspace's own campaign, the only kind its workflow
 * list shows; a simulation campaign's hidden workflow (src/rehearsals/: hidden from every workflow
 * endpoint, its runs, calls and approvals send no event, nothing is charged); an outreach call's
 * one-callee copy (src/outreach/); a public demo call's (src/demo/: billed to nobody).
 */
export type WorkflowKind = "campaign" | "rehearsal" | "outreach" | "demo"

export interface WorkflowRow {
  readonly id: number
  readonly tenant_id: number
  readonly kind: WorkflowKind
  readonly name: string
  readonly status: WorkflowStatus
  readonly persona: string
  readonly schedule_kind: ScheduleKind
  readonly schedule: Schedule
  readonly rule_book_id: number | null
  readonly nl_prompt: string
  readonly is_test: boolean
  readonly author_user_id: string | null
  readonly created_by_user_id: number | null
  readonly compliance: Record<string, unknown>
  readonly created_at: Date
  readonly updated_at: Date
  readonly retired_at: Date | null
  readonly archived_at: Date | null
}

export interface WorkflowDetailRow extends WorkflowRow {
  readonly rule_book: RuleBook | null
  readonly rule_book_version: number | null
  readonly audience_count: number
  readonly runs_count: number
  readonly running_run_id: number | null
}

export interface TenantContext {
  readonly id: number
  readonly country: string
  readonly currency: Currency
  readonly plan_tier: string
}

export const findTenantContext = async (sql: Sql | Tx, tenantId: number): Promise<TenantContext | undefined> => {
  const [row] = await sql<TenantContext[]>`select id, country, currency, plan_tier from tenants where id = ${tenantId}`
  return row
}

/** A workflow made from scratch: a workspace's campaign, or a public demo call's. */
export const insertWorkflow = async (
  tx: Tx,
  w: {
    kind: Extract<WorkflowKind, "campaign" | "demo">
    tenantId: number
    name: string
    persona: string
    nlPrompt: string
    isTest: boolean
    authorUserId: string | null
    createdByUserId: number | null
  },
): Promise<number> => {
  const [row] = await tx<[{ id: number }]>`
    insert into workflows (kind, tenant_id, name, persona, nl_prompt, is_test, author_user_id, created_by_user_id)
    values (${w.kind}, ${w.tenantId}, ${w.name}, ${w.persona}, ${w.nlPrompt}, ${w.isTest}, ${w.authorUserId},
      ${w.createdByUserId})
    returning id`
  return row.id
}

/** Stores a new version of a workflow's rule book and makes it the current one. */
export const insertRuleBookVersion = async (
  tx: Tx,
  v: {
    tenantId: number
    workflowId: number
    body: RuleBook
    source: "generated" | "edited"
    nlPrompt: string | null
    model: string | null
    userId: number | null
  },
): Promise<{ id: number; version: number }> => {
  const [row] = await tx<[{ id: number; version: number }]>`
    insert into rule_books (tenant_id, workflow_id, version, body, source, nl_prompt, model, created_by_user_id)
    values (
      ${v.tenantId}, ${v.workflowId},
      (select coalesce(max(version), 0) + 1 from rule_books where workflow_id = ${v.workflowId}),
      ${tx.json(v.body as never)}, ${v.source}, ${v.nlPrompt}, ${v.model}, ${v.userId})
    returning id, version`
  await tx`update workflows set rule_book_id = ${row.id}, updated_at = now() where id = ${v.workflowId}`
  return row
}

const detailColumns = (sql: Sql | Tx) => sql`
  w.*,
  rb.body as rule_book,
  rb.version as rule_book_version,
  (select count(*) from audience_targets a where a.workflow_id = w.id)::int as audience_count,
  (select count(*) from runs r where r.workflow_id = w.id)::int as runs_count,
  (select r.id from runs r where r.workflow_id = w.id and r.status = 'running' limit 1) as running_run_id`

/** The workflow with its rule book and counts; a rehearsal's hidden workflow is not found. */
export const findWorkflowDetail = async (
  sql: Sql | Tx,
  tenantId: number,
  id: number,
): Promise<WorkflowDetailRow | undefined> => {
  const [row] = await sql<WorkflowDetailRow[]>`
    select ${detailColumns(sql)}
    from workflows w left join rule_books rb on rb.id = w.rule_book_id
    where w.id = ${id} and w.tenant_id = ${tenantId} and w.kind <> 'rehearsal'`
  return row
}

/** The workflow row, locked until the transaction ends: status changes are decided under it. */
export const lockWorkflow = async (tx: Tx, tenantId: number, id: number): Promise<WorkflowDetailRow | undefined> => {
  const [locked] = await tx<
    [{ id: number }?]
  >`select id from workflows where id = ${id} and tenant_id = ${tenantId} for no key update`
  return locked === undefined ? undefined : findWorkflowDetail(tx, tenantId, id)
}

/**
 * One page of the workspace's campaigns, newest first, and one row more to tell if there is a next:
 * rehearsals', outreach calls' and demo calls' workflows are not listed.
 */
export const listWorkflows = (
  sql: Sql,
  tenantId: number,
  opts: { status: WorkflowStatus | undefined; includeArchived: boolean },
  page: ListPage,
) =>
  sql<
    Pick<
      WorkflowRow,
      | "id"
      | "name"
      | "status"
      | "persona"
      | "schedule_kind"
      | "rule_book_id"
      | "updated_at"
      | "created_at"
      | "archived_at"
    >[]
  >`
    select id, name, status, persona, schedule_kind, rule_book_id, updated_at, created_at, archived_at
    from workflows
    where tenant_id = ${tenantId} and kind = 'campaign'
      ${opts.status === undefined ? sql`` : sql`and status = ${opts.status}`}
      ${opts.includeArchived ? sql`` : sql`and archived_at is null`}
      ${page.before === undefined ? sql`` : sql`and id < ${page.before}`}
    order by id desc
    limit ${page.limit + 1}`

export const updateWorkflowSettings = async (
  tx: Tx,
  id: number,
  s: { name: string; persona: string; scheduleKind: ScheduleKind; schedule: Schedule; nlPrompt: string },
): Promise<void> => {
  await tx`
    update workflows
    set name = ${s.name}, persona = ${s.persona}, schedule_kind = ${s.scheduleKind},
        schedule = ${tx.json(s.schedule as never)}, nl_prompt = ${s.nlPrompt}, updated_at = now()
    where id = ${id}`
}

export const setCompliance = async (tx: Tx, id: number, compliance: Record<string, unknown>): Promise<void> => {
  await tx`update workflows set compliance = ${tx.json(compliance as never)}, updated_at = now() where id = ${id}`
}

export const retireWorkflow = async (tx: Tx, id: number, archive: boolean): Promise<void> => {
  await tx`
    update workflows
    set status = 'retired',
        retired_at = coalesce(retired_at, now()),
        archived_at = ${archive ? tx`coalesce(archived_at, now())` : tx`archived_at`},
        updated_at = now()
    where id = ${id}`
}

/**
 * The workflow's latest run, as far as its state goes (null before its first): read here for the
 * workflow's own view, as runs_count is, since src/runs builds on workflows and not the reverse.
 */
export interface LatestRun {
  readonly id: number
  readonly status: string
  readonly pause_reason: string | null
  readonly end_reason: string | null
  readonly started_at: Date
  readonly ended_at: Date | null
}

export const latestRun = async (sql: Sql | Tx, workflowId: number): Promise<LatestRun | null> => {
  const [row] = await sql<[LatestRun?]>`
    select id, status, pause_reason, end_reason, started_at, ended_at from runs
    where workflow_id = ${workflowId} order by id desc limit 1`
  return row ?? null
}

/** A run started, resumed or paused from the api: the workflow goes live or pauses with it. */
export const setWorkflowStatus = async (tx: Tx, workflowId: number, status: "live" | "paused"): Promise<void> => {
  await tx`update workflows set status = ${status}, updated_at = now() where id = ${workflowId}`
}

/** The wallet ran dry: a live workflow pauses with its run, so POST run resumes them. */
export const pauseLiveWorkflow = async (tx: Tx, workflowId: number): Promise<void> => {
  await tx`update workflows set status = 'paused', updated_at = now() where id = ${workflowId}
    and status = 'live'`
}

/** The workflow speaks as this persona (src/personas/ decides the assignment under the workflow's lock). */
/** The workflow's assigned persona (null: none, the rule book's catalogue persona speaks). */
export const setWorkflowPersona = async (tx: Tx, workflowId: number, personaId: number | null): Promise<void> => {
  await tx`update workflows set persona_id = ${personaId}, updated_at = now() where id = ${workflowId}`
}

/** The workflow's cloned voice (null: its persona's), decided by src/voices under the workflow's lock. */
export const setWorkflowVoice = async (tx: Tx, workflowId: number, voiceId: number | null): Promise<void> => {
  await tx`update workflows set voice_avatar_id = ${voiceId}, updated_at = now() where id = ${workflowId}`
}

/** A cloned voice being deleted leaves the workflows it was assigned to (src/voices, in its transaction). */
export const clearVoiceFromWorkflows = async (tx: Tx, voiceId: number): Promise<void> => {
  await tx`update workflows set voice_avatar_id = null where voice_avatar_id = ${voiceId}`
}

// --- simulation campaigns (src/rehearsals/) --------------------------------------------------------

/**
 * A simulation campaign's hidden workflow: a copy of the rehearsed one's rule book, persona and
 * voice (and schedule) that holds the simulated audience and the campaign's run, live from the
 * start. `simulation_of` names the rehearsed workflow, whose knowledge-base rules its calls follow.
 */
export const insertSimulationWorkflow = async (
  tx: Tx,
  w: { tenantId: number; ofWorkflowId: number; ruleBookId: number; name: string },
): Promise<number> => {
  const [row] = await tx<[{ id: number }]>`
    insert into workflows (kind, tenant_id, name, status, persona, schedule_kind, schedule, rule_book_id, nl_prompt,
      is_test, persona_id, voice_avatar_id, simulation_of)
    select 'rehearsal', o.tenant_id, ${w.name}, 'live', o.persona, o.schedule_kind, o.schedule, ${w.ruleBookId},
      o.nl_prompt, true, o.persona_id, o.voice_avatar_id, o.id
    from workflows o where o.id = ${w.ofWorkflowId} and o.tenant_id = ${w.tenantId}
    returning id`
  return row.id
}

/**
 * An outreach call's one-target workflow (src/outreach/): a live copy of the tenant's workflow (persona,
 * schedule, rule book, voice, compliance; `compliance.outreach_of` names the source), whose run dials one callee.
 */
export const insertOutreachWorkflow = async (
  tx: Tx,
  w: { tenantId: number; ofWorkflowId: number; name: string },
): Promise<number | undefined> => {
  const [row] = await tx<[{ id: number }?]>`
    insert into workflows (kind, tenant_id, name, status, persona, schedule_kind, schedule, rule_book_id, nl_prompt,
      is_test, persona_id, voice_avatar_id, compliance)
    select 'outreach', o.tenant_id, ${w.name}, 'live', o.persona, o.schedule_kind, o.schedule, o.rule_book_id,
      o.nl_prompt, false, o.persona_id, o.voice_avatar_id, o.compliance || jsonb_build_object('outreach_of', o.id)
    from workflows o where o.id = ${w.ofWorkflowId} and o.tenant_id = ${w.tenantId}
    returning id`
  return row?.id
}

export const renameSimulationWorkflow = async (tx: Tx, id: number, name: string): Promise<void> => {
  await tx`update workflows set name = ${name}, updated_at = now() where id = ${id} and kind = 'rehearsal'`
}
