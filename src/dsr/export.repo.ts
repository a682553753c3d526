// SQL of the data-subject export: a contact's rows in every table of the registry
// (contact-tables.ts), found by phone (E.164, plus other formats inside JSONB/free text) or email.
// Read-only; the erase has its own statements.
import type { PendingQuery, Row } from "postgres"
import type { TenantCountry } from "../phones/phone.js"
import type { Sql } from "../platform/Db.js"
import type { ContactIdentifier } from "./identifier.js"

type Rows = Record<string, unknown>[]
type Fragment = PendingQuery<Row[]>

export const tenantCountry = async (sql: Sql, tenantId: number): Promise<TenantCountry | undefined> => {
  const [row] = await sql<[{ country: TenantCountry }?]>`select country from tenants where id = ${tenantId}`
  return row?.country
}

/** `%x%` with LIKE's wildcards escaped. */
const contains = (x: string) => `%${x.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/**
 * Whether a JSONB column holds the identifier as one of its values: an email (any case) as a whole
 * string value anywhere; a phone whose digits (any format: spaces, dashes, national, 0-prefixed,
 * +country) are one of the identifier's digit forms, as a top-level value, or its E.164 anywhere.
 */
const jsonbHolds = (sql: Sql, column: Fragment, id: ContactIdentifier) =>
  id.kind === "email"
    ? sql`lower(${column}::text) like ${contains(JSON.stringify(id.value))}`
    : sql`(${column}::text like ${contains(id.value)} or exists (
        select 1 from jsonb_each_text(case when jsonb_typeof(${column}) = 'object' then ${column} else '{}' end) f
        where regexp_replace(f.value, '[^0-9]', '', 'g') = any(${id.digitForms as string[]})))`

/**
 * Text anywhere in a JSONB document naming the identifier, as the erase finds it: an email (any case)
 * as a substring (it may sit in a sentence, e.g. a summary); a phone as one of its digit forms with no
 * digit either side (E.164 with or without +, national, 0-prefixed).
 */
const documentHolds = (sql: Sql, column: Fragment, id: ContactIdentifier) => {
  if (id.kind === "email") return sql`lower(${column}::text) like ${contains(id.value)}`
  // Digits only (identifier.ts), so nothing to escape; never empty, or the pattern would match anything.
  const forms = id.digitForms.length > 0 ? id.digitForms : [id.value.slice(1)]
  return sql`${column}::text ~ ${`(?<![0-9])(${forms.join("|")})(?![0-9])`}`
}

/** Free text naming the identifier (E.164 or the email, any case). */
const textHolds = (sql: Sql, column: Fragment, id: ContactIdentifier) =>
  id.kind === "email" ? sql`lower(${column}) like ${contains(id.value)}` : sql`${column} like ${contains(id.value)}`

export interface ContactRows {
  readonly targets: Rows
  readonly run_targets: Rows
  readonly calls: Rows
  readonly turns: Rows
  readonly approvals: Rows
  readonly dnc: Rows
  readonly cooldown: Rows
  readonly consent: Rows
  readonly messages: Rows
  readonly email_events: Rows
  readonly email_preferences: Rows
  readonly email_suppressions: Rows
  readonly kb_feedback: Rows
  readonly data_source_rows: Rows
  readonly data_source_messages: Rows
  readonly inbound_calls: Rows
  readonly dial_decisions: Rows
  readonly demo_calls: Rows
  readonly kb_events: Rows
  readonly usage_events: Rows
  readonly call_analyses: Rows
  readonly webhook_events: Rows
}

/** Every row of the registry's tables that holds the contact, in the workspace. */
export async function contactRows(sql: Sql, tenantId: number, id: ContactIdentifier): Promise<ContactRows> {
  const phone = id.kind === "phone" ? id.value : null
  const email = id.kind === "email" ? id.value : null

  const targets = await sql`
    select id, workflow_id, phone_e164, name, fields, upload_id, created_at, updated_at
    from audience_targets t
    where t.tenant_id = ${tenantId}
      and (t.phone_e164 = ${phone ?? ""} or ${jsonbHolds(sql, sql`t.fields`, id)}
        ${email === null ? sql`` : sql`or lower(t.name) = ${email}`})
    order by id`
  const targetIds = targets.map((t) => Number(t["id"]))

  const [run_targets, calls] = await Promise.all([
    sql`select * from run_targets r
        where r.tenant_id = ${tenantId} and (r.phone_e164 = ${phone ?? ""} or r.target_id = any(${targetIds}))
        order by id`,
    sql`select * from calls c
        where c.tenant_id = ${tenantId} and (c.phone_e164 = ${phone ?? ""} or c.target_id = any(${targetIds}))
        order by id`,
  ])
  const callIds = calls.map((c) => Number(c["id"]))
  const runIds = [...new Set(run_targets.map((r) => Number(r["run_id"])))]

  const [turns, approvals, dnc, cooldown, consent, inbound_calls, dial_decisions, demo_calls] = await Promise.all([
    sql`select id, run_id, target_id, call_id, seq, turn_index, speaker, text, outcome_id, at from turns t
        where t.tenant_id = ${tenantId}
          and (t.target_id = any(${targetIds}) or t.call_id = any(${callIds}) or ${textHolds(sql, sql`t.text`, id)})
        order by run_id, seq`,
    sql`select * from approvals a
        where a.tenant_id = ${tenantId}
          and (a.target_phone = ${phone ?? ""} or a.call_id = any(${callIds}) or ${jsonbHolds(sql, sql`a.context`, id)})
        order by id`,
    sql`select id, phone_e164, reason, source, added_at from dnc_entries
        where tenant_id = ${tenantId} and phone_e164 = ${phone ?? ""}`,
    sql`select phone_e164, last_contacted_at from recent_contacts
        where tenant_id = ${tenantId} and phone_e164 = ${phone ?? ""}`,
    // The consent attested for each workflow whose audience holds the contact.
    sql`select w.id as workflow_id, w.name as workflow_name, w.compliance from workflows w
        where w.tenant_id = ${tenantId}
          and w.id in (select workflow_id from audience_targets where id = any(${targetIds}))
        order by w.id`,
    sql`select * from inbound_calls where tenant_id = ${tenantId} and from_e164 = ${phone ?? ""} order by id`,
    sql`select * from dial_decisions d
        where d.tenant_id = ${tenantId} and d.target_id = any(${targetIds}) and d.run_id = any(${runIds})
        order by id`,
    sql`select d.id, d.run_id, d.persona, d.created_at, d.expires_at from demo_calls d
        join runs r on r.id = d.run_id and r.tenant_id = ${tenantId}
        where d.run_id = any(${runIds}) order by d.id`,
  ])
  const turnIds = turns.map((t) => Number(t["id"]))

  const [call_analyses, outbound_events] = await Promise.all([
    // The lease columns (locked_by, locked_until, next_attempt_at) are the worker's, not the contact's.
    sql`select call_id, run_id, status, summary, goal_met, sentiment, callback_at, agreed_value_minor, fields,
          model, model_version, error, charged_minor, attempts, analyzed_at, created_at
        from call_analyses where tenant_id = ${tenantId} and call_id = any(${callIds}) order by call_id`,
    // Events of the contact's calls, or quoting the identifier, as sent, with where each went.
    sql`select e.id, e.type, e.body, e.created_at, coalesce((
          select json_agg(json_build_object('endpoint_id', d.endpoint_id, 'status', d.status,
            'attempts', d.attempts, 'delivered_at', d.delivered_at) order by d.id)
          from webhook_deliveries d where d.event_id = e.id), '[]') as deliveries
        from webhook_events e
        where e.tenant_id = ${tenantId}
          and ((e.body -> 'data' ->> 'call_id') = any(${callIds.map(String)})
            or ${documentHolds(sql, sql`e.body`, id)})
        order by e.created_at, e.id`,
  ])

  const [kb_feedback, messages, email_events, email_preferences, email_suppressions, usage_events] = await Promise.all([
    sql`select * from kb_feedback where tenant_id = ${tenantId} and turn_id = any(${turnIds}) order by id`,
    sql`select * from email_messages where tenant_id = ${tenantId} and to_email = ${email ?? ""} order by id`,
    sql`select * from email_events where tenant_id = ${tenantId} and to_email = ${email ?? ""} order by at, id`,
    sql`select * from email_preferences where tenant_id = ${tenantId} and email = ${email ?? ""} order by channel`,
    sql`select tenant_id, email, reason, source, created_at from email_suppressions
        where tenant_id = ${tenantId} and email = ${email ?? ""}`,
    sql`select * from usage_events u
        where u.tenant_id = ${tenantId} and u.attributes is not null and ${jsonbHolds(sql, sql`u.attributes`, id)}
        order by id`,
  ])
  const feedbackIds = kb_feedback.map((f) => Number(f["id"]))
  const kb_events = await sql`
    select * from kb_events k
    where k.tenant_id = ${tenantId} and (k.feedback_id = any(${feedbackIds}) or ${jsonbHolds(sql, sql`k.detail`, id)})
    order by id`
  const providerIds = messages.map((m) => m["provider_message_id"]).filter((p): p is string => typeof p === "string")

  const [soft_bounces, webhook_events, data_source_rows, data_source_messages] = await Promise.all([
    // Global rows: only when this workspace mailed the address.
    messages.length === 0
      ? Promise.resolve([] as Rows)
      : sql`select email, count, last_at, 'soft_bounce_count' as reason
            from email_soft_bounces where email = ${email ?? ""}`,
    providerIds.length === 0
      ? Promise.resolve([] as Rows)
      : sql`select * from email_webhook_events where provider_message_id = any(${providerIds}) order by received_at`,
    sql`select r.source_id, s.name as source_name, r.row_no, r.data from data_source_rows r
        join data_sources s on s.id = r.source_id and s.tenant_id = ${tenantId}
        where ${jsonbHolds(sql, sql`r.data`, id)}
        order by r.source_id, r.row_no`,
    sql`select * from data_source_messages m
        where m.tenant_id = ${tenantId} and (${textHolds(sql, sql`m.text`, id)} or ${jsonbHolds(sql, sql`m.data`, id)})
        order by id`,
  ])

  return {
    targets: [...targets],
    run_targets: [...run_targets],
    calls: [...calls],
    turns: [...turns],
    approvals: [...approvals],
    dnc: [...dnc],
    cooldown: [...cooldown],
    consent: [...consent],
    messages: [...messages],
    email_events: [...email_events, ...webhook_events],
    email_preferences: [...email_preferences],
    email_suppressions: [...email_suppressions, ...soft_bounces],
    kb_feedback: [...kb_feedback],
    data_source_rows: [...data_source_rows],
    data_source_messages: [...data_source_messages],
    inbound_calls: [...inbound_calls],
    dial_decisions: [...dial_decisions],
    demo_calls: [...demo_calls],
    kb_events: [...kb_events],
    usage_events: [...usage_events],
    call_analyses: [...call_analyses],
    webhook_events: [...outbound_events],
  }
}
