// SQL of the knowledge base: rules, feedback, the links between them and their timeline events.
// The only writer of kb_rules and kb_events (feedback and its links: feedback.repo.ts).
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { AgentRule, RuleTrigger } from "../providers/llm/llm.interface.js"

/** The active rules that apply to a run of `workflowId`: the workspace's and the workflow's, by priority. */
export async function activeAgentRules(sql: Sql | Tx, tenantId: number, workflowId: number): Promise<AgentRule[]> {
  const rows = await sql<
    Array<{ id: number; bucket: string; title: string; body: string; trigger: RuleTrigger | null; priority: number }>
  >`
    select id::int as id, bucket, title, body, trigger, priority from kb_rules
    where tenant_id = ${tenantId} and status = 'active' and (workflow_id is null or workflow_id = ${workflowId})
    order by priority desc, id desc`
  return rows.map((r) => ({ ...r }))
}

export type RuleStatus = "active" | "paused" | "archived"
export type RuleSource = "manual" | "import" | "feedback"
/** What kind of verdicts a learnt rule was made from (null for manual and imported rules). */
export type LearntKind = "ban" | "punish" | "reward"

export interface RuleRow {
  readonly id: number
  readonly tenant_id: number
  readonly workflow_id: number | null
  readonly bucket: string
  readonly title: string
  readonly body: string
  readonly trigger: RuleTrigger | null
  readonly priority: number
  readonly status: RuleStatus
  readonly source_kind: RuleSource
  readonly learnt_line: string | null
  readonly learnt_kind: LearntKind | null
  readonly created_at: Date
  readonly updated_at: Date
}

export interface NewRule {
  readonly workflow_id: number | null
  readonly bucket: string
  readonly title: string
  readonly body: string
  readonly trigger: RuleTrigger | null
  readonly priority: number
  readonly status: RuleStatus
  readonly source_kind: RuleSource
  readonly learnt_line?: string | null
  readonly learnt_kind?: LearntKind | null
}

const RULE_COLUMNS = (sql: Sql | Tx) =>
  sql`id::int as id, tenant_id::int as tenant_id, workflow_id::int as workflow_id, bucket, title, body, trigger,
    priority, status, source_kind, learnt_line, learnt_kind, created_at, updated_at`

/** Inserts rules in one statement (any count: eight array parameters), in order; returns them. */
export async function insertRules(
  sql: Sql | Tx,
  tenantId: number,
  rules: ReadonlyArray<NewRule>,
  now: Date,
): Promise<RuleRow[]> {
  if (rules.length === 0) return []
  const col = <T>(f: (r: NewRule) => T, type: number) => sql.array(rules.map(f) as never[], type)
  const rows = await sql<RuleRow[]>`
    insert into kb_rules (tenant_id, workflow_id, bucket, title, body, trigger, priority, status, source_kind,
      learnt_line, learnt_kind, created_at, updated_at)
    select ${tenantId}, w, b, t, bo, tr::jsonb, p, s, k, ll, lk, ${now}, ${now}
    from unnest(
      ${col((r) => r.workflow_id, 20)}::bigint[], ${col((r) => r.bucket, 25)}::text[],
      ${col((r) => r.title, 25)}::text[], ${col((r) => r.body, 25)}::text[],
      ${col((r) => (r.trigger === null ? null : JSON.stringify(r.trigger)), 25)}::text[],
      ${col((r) => r.priority, 23)}::int[], ${col((r) => r.status, 25)}::text[],
      ${col((r) => r.source_kind, 25)}::text[], ${col((r) => r.learnt_line ?? null, 25)}::text[],
      ${col((r) => r.learnt_kind ?? null, 25)}::text[]
    ) with ordinality as x(w, b, t, bo, tr, p, s, k, ll, lk, i)
    order by i
    returning ${RULE_COLUMNS(sql)}`
  return [...rows]
}

export interface RulePatch {
  readonly workflow_id?: number | null
  readonly bucket?: string
  readonly title?: string
  readonly body?: string
  readonly trigger?: RuleTrigger | null
  readonly priority?: number
  readonly status?: RuleStatus
}

/** Changes the fields given of one of the tenant's rules; undefined when there is no such rule. */
export async function updateRule(
  sql: Sql | Tx,
  tenantId: number,
  id: number,
  patch: RulePatch,
  now: Date,
): Promise<RuleRow | undefined> {
  const set: Record<string, unknown> = { updated_at: now }
  for (const [k, v] of Object.entries(patch))
    if (v !== undefined) set[k] = k === "trigger" && v !== null ? sql.json(v as never) : v
  const [row] = await sql<RuleRow[]>`
    update kb_rules set ${sql(set)} where tenant_id = ${tenantId} and id = ${id}
    returning ${RULE_COLUMNS(sql)}`
  return row
}

/** The live (not archived) rule learnt from `kind` verdicts on `line` for a workflow, if any. */
export async function findLearntRule(
  sql: Sql | Tx,
  tenantId: number,
  workflowId: number | null,
  kind: LearntKind,
  line: string,
): Promise<RuleRow | undefined> {
  const [row] = await sql<RuleRow[]>`
    select ${RULE_COLUMNS(sql)} from kb_rules
    where tenant_id = ${tenantId} and coalesce(workflow_id, 0) = ${workflowId ?? 0}
      and learnt_kind = ${kind} and learnt_line = ${line} and status <> 'archived'`
  return row
}

export interface KbEvent {
  readonly workflow_id: number | null
  /** rule_created, rule_updated, rule_archived, rules_imported, feedback_given, rule_learnt, … */
  readonly action: string
  readonly rule_id?: number | null
  readonly feedback_id?: number | null
  readonly detail?: Record<string, unknown>
}

/** Records knowledge-base changes for the timeline (inside the transaction that made them). */
export async function recordEvents(
  sql: Sql | Tx,
  tenantId: number,
  events: ReadonlyArray<KbEvent>,
  now: Date,
): Promise<void> {
  if (events.length === 0) return
  await sql`
    insert into kb_events (tenant_id, workflow_id, action, rule_id, feedback_id, detail, at)
    select ${tenantId}, w, a, r, f, d::jsonb, ${now}
    from unnest(
      ${sql.array(events.map((e) => e.workflow_id) as never[], 20)}::bigint[], ${sql.array(
        events.map((e) => e.action),
        25,
      )}::text[],
      ${sql.array(events.map((e) => e.rule_id ?? null) as never[], 20)}::bigint[], ${sql.array(
        events.map((e) => e.feedback_id ?? null) as never[],
        20,
      )}::bigint[],
      ${sql.array(
        events.map((e) => JSON.stringify(e.detail ?? {})),
        25,
      )}::text[]
    ) as x(w, a, r, f, d)`
}

/** One of the tenant's rules, archived or not. */
export async function findRule(sql: Sql | Tx, tenantId: number, id: number): Promise<RuleRow | undefined> {
  const [row] = await sql<RuleRow[]>`
    select ${RULE_COLUMNS(sql)} from kb_rules where tenant_id = ${tenantId} and id = ${id}`
  return row
}

export interface RuleFilter {
  readonly bucket?: string | undefined
  readonly status?: RuleStatus | undefined
  readonly includeArchived: boolean
  /** Rows to read (the service asks one more than a page to tell whether another follows). */
  readonly limit: number
  /** Only rules with a smaller id (the page after a cursor). */
  readonly before?: number | undefined
}

/** The tenant's rules, newest first; archived ones only when asked for (or filtered on by status). */
export async function listRules(sql: Sql | Tx, tenantId: number, f: RuleFilter): Promise<RuleRow[]> {
  const rows = await sql<RuleRow[]>`
    select ${RULE_COLUMNS(sql)} from kb_rules
    where tenant_id = ${tenantId}
      ${f.bucket === undefined ? sql`` : sql`and bucket = ${f.bucket}`}
      ${f.status === undefined ? sql`` : sql`and status = ${f.status}`}
      ${f.includeArchived || f.status === "archived" ? sql`` : sql`and status <> 'archived'`}
      ${f.before === undefined ? sql`` : sql`and id < ${f.before}`}
    order by id desc
    limit ${f.limit}`
  return [...rows]
}

/** Every rule of the tenant for an export, oldest first (so an import recreates them in order). */
export async function exportRules(sql: Sql | Tx, tenantId: number, includeArchived: boolean): Promise<RuleRow[]> {
  const rows = await sql<RuleRow[]>`
    select ${RULE_COLUMNS(sql)} from kb_rules
    where tenant_id = ${tenantId} ${includeArchived ? sql`` : sql`and status <> 'archived'`}
    order by id`
  return [...rows]
}

/** The feedback each of these rules was learnt from, by rule id (rules without any are absent). */
export async function feedbackIdsOf(sql: Sql | Tx, ruleIds: ReadonlyArray<number>): Promise<Map<number, number[]>> {
  const out = new Map<number, number[]>()
  if (ruleIds.length === 0) return out
  const rows = await sql<Array<{ rule_id: number; feedback_id: number }>>`
    select rule_id::int as rule_id, feedback_id::int as feedback_id from kb_rule_feedback
    where rule_id = any(${sql.array(ruleIds as number[], 20)}::bigint[])
    order by rule_id, feedback_id`
  for (const r of rows) {
    const ids = out.get(r.rule_id)
    if (ids === undefined) out.set(r.rule_id, [r.feedback_id])
    else ids.push(r.feedback_id)
  }
  return out
}

/** Which of these ids are workflows of the tenant that have not been deleted. */
export async function liveWorkflowIds(
  sql: Sql | Tx,
  tenantId: number,
  ids: ReadonlyArray<number>,
): Promise<Set<number>> {
  if (ids.length === 0) return new Set()
  const rows = await sql<Array<{ id: number }>>`
    select id::int as id from workflows
    where tenant_id = ${tenantId} and archived_at is null and id = any(${sql.array(ids as number[], 20)}::bigint[])`
  return new Set(rows.map((r) => r.id))
}

/** Archives one rule unless it already is; undefined when there is no such live rule. */
export async function archiveRule(
  sql: Sql | Tx,
  tenantId: number,
  id: number,
  now: Date,
): Promise<RuleRow | undefined> {
  const [row] = await sql<RuleRow[]>`
    update kb_rules set status = 'archived', updated_at = ${now}
    where tenant_id = ${tenantId} and id = ${id} and status <> 'archived'
    returning ${RULE_COLUMNS(sql)}`
  return row
}

/** The active and paused rules of these buckets: what an import with mode=replace archives. */
export async function liveRulesInBuckets(
  sql: Sql | Tx,
  tenantId: number,
  buckets: ReadonlyArray<string>,
): Promise<Array<{ id: number; workflow_id: number | null }>> {
  if (buckets.length === 0) return []
  const rows = await sql<Array<{ id: number; workflow_id: number | null }>>`
    select id::int as id, workflow_id::int as workflow_id from kb_rules
    where tenant_id = ${tenantId} and status <> 'archived'
      and bucket = any(${sql.array(buckets as string[], 25)}::text[])`
  return [...rows]
}

/** Archives the active and paused rules of these buckets; returns the ones it archived. */
export async function archiveBuckets(
  sql: Sql | Tx,
  tenantId: number,
  buckets: ReadonlyArray<string>,
  now: Date,
): Promise<Array<{ id: number; workflow_id: number | null }>> {
  if (buckets.length === 0) return []
  const rows = await sql<Array<{ id: number; workflow_id: number | null }>>`
    update kb_rules set status = 'archived', updated_at = ${now}
    where tenant_id = ${tenantId} and status <> 'archived'
      and bucket = any(${sql.array(buckets as string[], 25)}::text[])
    returning id::int as id, workflow_id::int as workflow_id`
  return [...rows]
}

/** A data-subject erase (src/dsr/): the timeline keeps its events, the contact scrubbed out of them. */
export const scrubKbEvents = async (tx: Tx, m: ContactMatch): Promise<number> =>
  (
    await tx`
    update kb_events set detail = ${m.scrub("detail")}::jsonb
    where tenant_id = ${m.tenantId} and ${m.mentions("detail")}`
  ).count
