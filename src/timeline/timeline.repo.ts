// SQL for the contact timeline: one query per source of events (calls, turn summaries, approvals,
// DNC entries, dialer decisions, verdicts on its calls' turns for a phone; decisions, API keys,
// workflows, attestations, the account and knowledge-base changes for a user). Each is
// tenant-scoped, newest first, cut to the page and to the cursor.

import type { PendingQuery, Row } from "postgres"
import { effectiveApprovalStatus } from "../approvals/approvals.repo.js"
import type { TenantCountry } from "../phones/phone.js"
import type { Sql } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import { type Cursor, KEY_SOURCES, SOURCE } from "./timeline.cursor.js"

type Fragment = PendingQuery<Row[]>

/** The workspace's country: a phone written without a country code is read as one of its numbers. */
export const tenantCountry = async (sql: Sql, tenantId: number): Promise<{ country: TenantCountry } | undefined> => {
  const [row] = await sql<[{ country: TenantCountry }?]>`select country from tenants where id = ${tenantId}`
  return row
}

/** Every row carries its time in microseconds and its tiebreak key (see timeline.cursor.ts). */
export interface Ordered {
  readonly at_us: number
  readonly key: number
}

export interface Page {
  readonly cursor: Cursor | undefined
  readonly n: number
}

const micros = (sql: Sql, at: Fragment) => sql`(extract(epoch from ${at}) * 1000000)::bigint`
const keyOf = (sql: Sql, id: Fragment, source: number) => sql`(${id} * ${KEY_SOURCES} + ${source})::bigint`

/** `and <event> is older than the cursor`, or nothing on the first page. */
function olderThan(sql: Sql, at: Fragment, key: Fragment, cursor: Cursor | undefined): Fragment {
  if (cursor === undefined) return sql``
  if (cursor.key === undefined) return sql`and ${at} < ${cursor.at}::timestamptz`
  return sql`and (${at}, ${key}) < (${cursor.at}::timestamptz, ${cursor.key}::bigint)`
}

// ---------------------------------------------------------------------------------------------
// A phone number

export interface CallRow extends Ordered {
  readonly id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly target_id: number
  readonly attempt: number
  readonly status: string
  readonly outcome: string | null
  readonly connected_seconds: number | null
  readonly cost_minor: number | null
  readonly currency: Currency
  readonly started_at: Date
  readonly answered_at: Date | null
  readonly ended_at: Date | null
  /** What the post-call analysis made of it (call_analyses); null fields while there is none. */
  readonly analysis_status: "pending" | "done" | "failed" | null
  readonly analysis_summary: string | null
  readonly goal_met: boolean | null
  readonly sentiment: string | null
}

export const callsByPhone = (sql: Sql, tenantId: number, phone: string, page: Page) => {
  const at = sql`c.started_at`
  const key = keyOf(sql, sql`c.id`, SOURCE.call)
  return sql<CallRow[]>`
    select c.id, c.run_id, c.workflow_id, c.target_id, c.attempt, c.status, c.outcome, c.connected_seconds,
      c.cost_minor,
           t.currency, c.started_at, c.answered_at, c.ended_at, ${micros(sql, at)} as at_us, ${key} as key,
           ca.status as analysis_status, ca.summary as analysis_summary, ca.goal_met, ca.sentiment
    from calls c join tenants t on t.id = c.tenant_id
    left join call_analyses ca on ca.call_id = c.id
    where c.tenant_id = ${tenantId} and c.phone_e164 = ${phone} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, c.id desc
    limit ${page.n}`
}

export interface TurnSummaryRow extends Ordered {
  readonly call_id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly target_id: number
  readonly turns: number
  readonly first_at: Date
  readonly last_at: Date
  readonly first_agent_line: string | null
  readonly last_callee_line: string | null
}

/** One summary per call that has turns, dated by its last turn. */
export const turnSummariesByPhone = (sql: Sql, tenantId: number, phone: string, page: Page) => {
  const at = sql`s.last_at`
  const key = keyOf(sql, sql`c.id`, SOURCE.turns)
  return sql<TurnSummaryRow[]>`
    select c.id as call_id, c.run_id, c.workflow_id, c.target_id, s.turns, s.first_at, s.last_at,
           (select t.text from turns t where t.call_id = c.id and t.speaker = 'agent' order by t.turn_index limit 1)
             as first_agent_line,
           (select t.text from turns t where t.call_id = c.id and t.speaker = 'callee' order by t.turn_index desc
             limit 1) as last_callee_line,
           ${micros(sql, at)} as at_us, ${key} as key
    from calls c
    join lateral (select count(*)::int as turns, min(t.at) as first_at, max(t.at) as last_at from turns t
      where t.call_id = c.id) s on s.turns > 0
    where c.tenant_id = ${tenantId} and c.phone_e164 = ${phone} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, c.id desc
    limit ${page.n}`
}

export interface ApprovalRow extends Ordered {
  readonly id: number
  readonly workflow_id: number
  readonly run_id: number | null
  readonly call_id: number | null
  readonly target_phone: string | null
  readonly proposed_action: "concession" | "callback" | "escalate"
  readonly proposed_value_minor: number | null
  readonly currency: Currency
  readonly rationale: string | null
  /** approved, denied or expired; pending on a request not yet resolved. */
  readonly status: string
  readonly created_at: Date
  readonly expires_at: Date
  readonly decided_at: Date | null
  readonly decided_by: number | null
  readonly decided_by_email: string | null
  readonly note: string | null
}

// A pending approval past its expiry is expired, whether or not its timer has written that yet.
const approvalColumns = (sql: Sql, now: Date) => sql`
  a.id, a.workflow_id, a.run_id, a.call_id, a.target_phone, a.proposed_action, a.proposed_value_minor, a.currency,
    a.rationale,
  ${effectiveApprovalStatus(sql, "a", now)} as status,
  a.created_at, a.expires_at, a.decided_at, a.decided_by, u.email as decided_by_email, a.note`

const resolved = (sql: Sql, now: Date) => sql`${effectiveApprovalStatus(sql, "a", now)} <> 'pending'`
// An expiry has no decided_at of its own: it happened when the approval lapsed.
const resolvedAt = (sql: Sql) => sql`coalesce(a.decided_at, a.expires_at)`

export const approvalRequestsByPhone = (sql: Sql, tenantId: number, phone: string, now: Date, page: Page) => {
  const at = sql`a.created_at`
  const key = keyOf(sql, sql`a.id`, SOURCE.approvalRequested)
  return sql<ApprovalRow[]>`
    select ${approvalColumns(sql, now)}, ${micros(sql, at)} as at_us, ${key} as key
    from approvals a left join users u on u.id = a.decided_by
    where a.tenant_id = ${tenantId} and a.target_phone = ${phone} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, a.id desc
    limit ${page.n}`
}

const approvalResolutions = (sql: Sql, tenantId: number, who: Fragment, now: Date, page: Page) => {
  const at = resolvedAt(sql)
  const key = keyOf(sql, sql`a.id`, SOURCE.approvalResolved)
  return sql<ApprovalRow[]>`
    select ${approvalColumns(sql, now)}, ${micros(sql, at)} as at_us, ${key} as key
    from approvals a left join users u on u.id = a.decided_by
    where a.tenant_id = ${tenantId} and ${who} and ${resolved(sql, now)} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, a.id desc
    limit ${page.n}`
}

export const approvalResolutionsByPhone = (sql: Sql, tenantId: number, phone: string, now: Date, page: Page) =>
  approvalResolutions(sql, tenantId, sql`a.target_phone = ${phone}`, now, page)

export interface DncRow extends Ordered {
  readonly id: number
  readonly phone_e164: string
  readonly reason: string | null
  readonly source: string
  readonly added_at: Date
}

export const dncByPhone = (sql: Sql, tenantId: number, phone: string, page: Page) => {
  const at = sql`d.added_at`
  const key = keyOf(sql, sql`d.id`, SOURCE.dnc)
  return sql<DncRow[]>`
    select d.id, d.phone_e164, d.reason, d.source, d.added_at, ${micros(sql, at)} as at_us, ${key} as key
    from dnc_entries d
    where d.tenant_id = ${tenantId} and d.phone_e164 = ${phone} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, d.id desc
    limit ${page.n}`
}

export interface InboundCallRow extends Ordered {
  readonly id: number
  readonly workflow_id: number | null
  readonly provider: string
  readonly provider_call_id: string
  readonly to_e164: string
  readonly status: string
  readonly duration_seconds: number | null
  readonly greeting: string | null
  readonly started_at: Date
}

/** Calls the contact made to one of the workspace's numbers. */
export const inboundCallsByPhone = (sql: Sql, tenantId: number, phone: string, page: Page) => {
  const at = sql`i.started_at`
  const key = keyOf(sql, sql`i.id`, SOURCE.inboundCall)
  return sql<InboundCallRow[]>`
    select i.id, i.workflow_id, i.provider, i.provider_call_id, i.to_e164, i.status, i.duration_seconds, i.greeting,
      i.started_at,
           ${micros(sql, at)} as at_us, ${key} as key
    from inbound_calls i
    where i.tenant_id = ${tenantId} and i.from_e164 = ${phone} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, i.id desc
    limit ${page.n}`
}

export interface DialerRow extends Ordered {
  readonly id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly target_id: number
  readonly call_id: number | null
  readonly decision: string
  readonly reason: string
  readonly detail: Record<string, unknown>
  readonly at: Date
}

/**
 * What the dialer did instead of (or before) calling: skips, holds, and stops that ended a target
 * without a call. Decisions about a call (dial, retry, its stop) are already told by the call.
 */
export const dialerByPhone = (sql: Sql, tenantId: number, phone: string, page: Page) => {
  const at = sql`d.at`
  const key = keyOf(sql, sql`d.id`, SOURCE.dialer)
  return sql<DialerRow[]>`
    select d.id, d.run_id, r.workflow_id, d.target_id, d.call_id, d.decision, d.reason, d.detail, d.at,
           ${micros(sql, at)} as at_us, ${key} as key
    from dial_decisions d
    join audience_targets t on t.id = d.target_id and t.tenant_id = ${tenantId}
    join runs r on r.id = d.run_id
    where d.tenant_id = ${tenantId} and t.phone_e164 = ${phone}
      and (d.decision in ('skip', 'hold') or (d.decision = 'stop' and d.call_id is null))
      ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, d.id desc
    limit ${page.n}`
}

// ---------------------------------------------------------------------------------------------
// A user of the workspace

export interface UserRow {
  readonly id: number
  readonly email: string
  readonly full_name: string | null
  readonly role: string
  readonly created_at: Date
  readonly email_verified_at: Date | null
}

/** The user, only when they belong to this workspace. */
export const findUser = async (
  sql: Sql,
  tenantId: number,
  by: { userId: number } | { email: string },
): Promise<UserRow | undefined> => {
  const [row] = await sql<UserRow[]>`
    select id, email, full_name, role, created_at, email_verified_at
    from users
    where tenant_id = ${tenantId} and ${"userId" in by ? sql`id = ${by.userId}` : sql`email = ${by.email}`}`
  return row
}

export const decisionsByUser = (sql: Sql, tenantId: number, userId: number, now: Date, page: Page) =>
  approvalResolutions(sql, tenantId, sql`a.decided_by = ${userId}`, now, page)

export interface ApiKeyEventRow extends Ordered {
  readonly id: number
  readonly key_id: number
  readonly action: "created" | "revoked" | "deleted"
  readonly ip: string | null
  readonly at: Date
  /** Null once the key is deleted: the trail outlives it. */
  readonly name: string | null
  readonly prefix: string | null
  readonly scope: string | null
  readonly revoked_reason: string | null
}

export const apiKeyEventsByUser = (sql: Sql, tenantId: number, userId: number, page: Page) => {
  const at = sql`e.at`
  const key = keyOf(sql, sql`e.id`, SOURCE.apiKey)
  return sql<ApiKeyEventRow[]>`
    select e.id, e.key_id, e.action, e.ip, e.at, k.name, k.prefix, k.scope, k.revoked_reason,
           ${micros(sql, at)} as at_us, ${key} as key
    from api_key_events e left join api_keys k on k.id = e.key_id and k.tenant_id = e.tenant_id
    where e.tenant_id = ${tenantId} and e.actor_user_id = ${userId} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, e.id desc
    limit ${page.n}`
}

export interface WorkflowRow extends Ordered {
  readonly id: number
  readonly name: string
  readonly status: string
  readonly persona: string
  readonly created_at: Date
  readonly compliance: Record<string, unknown>
}

export const workflowsCreatedBy = (sql: Sql, tenantId: number, userId: number, page: Page) => {
  const at = sql`w.created_at`
  const key = keyOf(sql, sql`w.id`, SOURCE.workflow)
  return sql<WorkflowRow[]>`
    select w.id, w.name, w.status, w.persona, w.created_at, w.compliance, ${micros(sql, at)} as at_us, ${key} as key
    from workflows w
    where w.tenant_id = ${tenantId} and w.created_by_user_id = ${userId} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, w.id desc
    limit ${page.n}`
}

/** Consent attestations: a workflow keeps only its latest, so this is one event per workflow at most. */
export const consentAttestedBy = (sql: Sql, tenantId: number, userId: number, page: Page) => {
  const at = sql`(w.compliance ->> 'consent_attested_at')::timestamptz`
  const key = keyOf(sql, sql`w.id`, SOURCE.consent)
  return sql<WorkflowRow[]>`
    select w.id, w.name, w.status, w.persona, w.created_at, w.compliance, ${micros(sql, at)} as at_us, ${key} as key
    from workflows w
    where w.tenant_id = ${tenantId}
      and w.compliance ->> 'consent_attested_by_user_id' = ${String(userId)}
      and w.compliance ? 'consent_attested_at'
      ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, w.id desc
    limit ${page.n}`
}

export interface AccountEventRow extends Ordered {
  readonly kind: "signup" | "verification_email" | "email_verified"
  readonly at: Date
  readonly expires_at: Date | null
  readonly used_at: Date | null
}

/** The account's own history: signup, each verification email issued, the verification. */
export const accountEvents = (sql: Sql, userId: number, page: Page) => {
  // email_verifications has no id: 48 bits of its token hash tell its rows apart.
  const tokenId = sql`('x' || substr(encode(v.token_sha256, 'hex'), 1, 12))::bit(48)::bigint`
  const u = { at: sql`u.created_at`, key: keyOf(sql, sql`u.id`, SOURCE.signup) }
  const ver = { at: sql`u.email_verified_at`, key: keyOf(sql, sql`u.id`, SOURCE.emailVerified) }
  const mail = { at: sql`v.created_at`, key: keyOf(sql, tokenId, SOURCE.verificationEmail) }
  return sql<AccountEventRow[]>`
    select * from (
      select 'signup' as kind, ${u.at} as at, null::timestamptz as expires_at, null::timestamptz as used_at,
             ${micros(sql, u.at)} as at_us, ${u.key} as key
      from users u where u.id = ${userId} ${olderThan(sql, u.at, u.key, page.cursor)}
      union all
      select 'email_verified', ${ver.at}, null, null, ${micros(sql, ver.at)}, ${ver.key}
      from users u where u.id = ${userId} and u.email_verified_at is not null
        ${olderThan(sql, ver.at, ver.key, page.cursor)}
      union all
      select 'verification_email', ${mail.at}, v.expires_at, v.used_at, ${micros(sql, mail.at)}, ${mail.key}
      from email_verifications v where v.user_id = ${userId} ${olderThan(sql, mail.at, mail.key, page.cursor)}
    ) e
    order by e.at desc, e.key desc
    limit ${page.n}`
}

// ---------------------------------------------------------------------------------------------
// The knowledge base (either subject)

export interface KbEventRow extends Ordered {
  readonly id: number
  readonly workflow_id: number | null
  /** feedback_given, rule_learnt, rule_created, rule_updated, rule_archived, rules_imported, … */
  readonly action: string
  readonly rule_id: number | null
  readonly feedback_id: number | null
  readonly detail: Record<string, unknown>
  readonly at: Date
  /** The rule's title and bucket now (the event's own, when it recorded them, come first). */
  readonly title: string | null
  readonly bucket: string | null
  readonly run_id: number | null
  readonly turn_id: number | null
  readonly verdict: string | null
  readonly line: string | null
}

const kbEvents = (sql: Sql, tenantId: number, joins: Fragment, who: Fragment, page: Page) => {
  const at = sql`e.at`
  const key = keyOf(sql, sql`e.id`, SOURCE.kb)
  return sql<KbEventRow[]>`
    select e.id, e.workflow_id, e.action, e.rule_id, e.feedback_id, e.detail, e.at,
           coalesce(e.detail ->> 'title', r.title) as title, coalesce(e.detail ->> 'bucket', r.bucket) as bucket,
           f.run_id, f.turn_id, coalesce(e.detail ->> 'verdict', f.verdict) as verdict, f.line,
           ${micros(sql, at)} as at_us, ${key} as key
    from kb_events e
    left join kb_rules r on r.id = e.rule_id and r.tenant_id = e.tenant_id
    left join kb_feedback f on f.id = e.feedback_id and f.tenant_id = e.tenant_id
    ${joins}
    where e.tenant_id = ${tenantId} and ${who} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, e.id desc
    limit ${page.n}`
}

/** Verdicts on the agent's lines to this number, and the rules learnt from them. */
export const kbEventsByPhone = (sql: Sql, tenantId: number, phone: string, page: Page) =>
  kbEvents(
    sql,
    tenantId,
    sql`join turns t on t.id = f.turn_id join audience_targets a on a.id = t.target_id and a.tenant_id = e.tenant_id`,
    sql`a.phone_e164 = ${phone}`,
    page,
  )

/** Knowledge-base changes the user made (events that name them as `detail.actor`). */
export const kbEventsByUser = (sql: Sql, tenantId: number, userId: number, page: Page) =>
  kbEvents(sql, tenantId, sql``, sql`e.detail ->> 'actor' = ${`user:${userId}`}`, page)

// ---------------------------------------------------------------------------------------------
// An email address: outreach messages and what happened to them (the message.* events)

export interface MessageEventRow extends Ordered {
  readonly id: number
  readonly message_id: number | null
  readonly to_email: string
  readonly kind: string
  readonly channel: string | null
  readonly detail: string | null
  readonly subject: string | null
}

export const messageEventsByEmail = (sql: Sql, tenantId: number, email: string, page: Page) => {
  const at = sql`e.at`
  const key = keyOf(sql, sql`e.id`, SOURCE.message)
  return sql<MessageEventRow[]>`
    select e.id, e.message_id, e.to_email, e.kind, e.channel, e.detail, m.subject, ${micros(sql, at)} as at_us,
      ${key} as key
    from email_events e left join email_messages m on m.id = e.message_id
    where e.tenant_id = ${tenantId} and e.to_email = ${email} ${olderThan(sql, at, key, page.cursor)}
    order by ${at} desc, e.id desc
    limit ${page.n}`
}
