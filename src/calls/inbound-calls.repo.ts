// SQL behind the telephony webhooks an api process answers: whose call a webhook names, the
// greeting context of a number's workflow, the record of calls to our numbers (inbound_calls), and
// signed callbacks about calls we do not know (telco_unmatched_callbacks).
import type { Sql, Tx } from "../platform/Db.js"

export interface GreetingContext {
  readonly tenant_name: string
  readonly opening: string | null
  readonly persona: string | null
}

export const tenantOfCall = async (sql: Sql, callId: number): Promise<number | undefined> => {
  const [row] = await sql<[{ tenant_id: number }?]>`select tenant_id from calls where id = ${callId}`
  return row?.tenant_id
}

/** Whether a workspace with this id exists (the tenant a webhook URL names). */
export const tenantExists = async (sql: Sql, tenantId: number): Promise<boolean> => {
  const [row] = await sql<[{ id: number }?]>`select id from tenants where id = ${tenantId}`
  return row !== undefined
}

/** The workspace's name with the opening line and persona of the workflow (if any) behind a number. */
export const greetingContext = async (
  sql: Sql,
  tenantId: number,
  workflowId: number | null,
): Promise<GreetingContext | undefined> => {
  const [ctx] = await sql<[GreetingContext?]>`
    select t.name as tenant_name, rb.body->>'opening_line' as opening, w.persona
    from tenants t
    left join workflows w on w.id = ${workflowId} and w.tenant_id = t.id
    left join rule_books rb on rb.id = w.rule_book_id
    where t.id = ${tenantId}`
  return ctx
}

/** Records a call to one of our numbers; a repeated webhook for the same call changes nothing. */
export const recordInboundCall = async (
  sql: Sql,
  c: {
    tenantId: number
    numberId: number
    workflowId: number | null
    provider: "telco_a" | "telco_b"
    providerCallId: string
    from: string
    to: string
    greeting: string
  },
): Promise<void> => {
  await sql`
    insert into inbound_calls (tenant_id, number_id, workflow_id, provider, provider_call_id, from_e164, to_e164,
      greeting)
    values (${c.tenantId}, ${c.numberId}, ${c.workflowId}, ${c.provider}, ${c.providerCallId}, ${c.from}, ${c.to},
      ${c.greeting})
    on conflict (provider, provider_call_id) do nothing`
}

/** A status callback onto the record of a telco_a call to our number; `ended` stamps its end once. */
export const updateInboundStatus = async (
  sql: Sql,
  u: { tenantId: number; providerCallId: string; status: string; durationSeconds: number | null; ended: boolean },
): Promise<boolean> => {
  const updated = await sql`
    update inbound_calls set status = ${u.status}, duration_seconds = coalesce(${u.durationSeconds}, duration_seconds),
      ended_at = ${u.ended ? sql`coalesce(ended_at, now())` : sql`ended_at`}
    where provider = 'telco_a' and provider_call_id = ${u.providerCallId} and tenant_id = ${u.tenantId}`
  return updated.count > 0
}

/** Keeps a signed callback about a call we do not know (no phone numbers: only what names it). */
export const recordUnmatchedCallback = async (
  sql: Sql,
  c: {
    tenantId: number
    kind: "status" | "voice"
    method: "GET" | "POST"
    providerCallId: string | null
    callStatus: string | null
    durationSeconds: number | null
  },
): Promise<void> => {
  await sql`
    insert into telco_unmatched_callbacks (tenant_id, provider, kind, method, provider_call_id, call_status,
      duration_seconds)
    values (${c.tenantId}, 'telco_a', ${c.kind}, ${c.method}, ${c.providerCallId}, ${c.callStatus},
      ${c.durationSeconds})`
}

/** A data-subject erase (src/dsr/): calls from the number are kept (billing), the marker for the number. */
export const eraseInboundCaller = async (tx: Tx, tenantId: number, phone: string, marker: string): Promise<number> =>
  (await tx`update inbound_calls set from_e164 = ${marker} where tenant_id = ${tenantId} and from_e164 = ${phone}`)
    .count
