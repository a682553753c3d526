// SQL of outreach email: messages and their states, the per-address event log (the message.*
// timeline source), channel preferences, suppressions, soft-bounce counts and webhook dedup.
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import { type MessageObjectRow, messageEvent } from "../webhooks/event-data.js"
import { emitEvents } from "../webhooks/outbox.repo.js"

type Q = Sql | Tx

/** tenant_id of a suppression that holds in every workspace (hard bounces, complaints). */
export const GLOBAL_TENANT = 0

export type MessageState = "queued" | "sent" | "delivered" | "bounced" | "complained" | "failed"
export type SuppressionReason = "hard_bounce" | "complaint" | "unsubscribe" | "soft_bounce"

export interface MessageRow {
  readonly id: number
  readonly tenant_id: number
  readonly to_email: string
  readonly channel: string
  readonly state: MessageState
  readonly provider_message_id: string | null
}

/** The workspace's name (its mail goes out in its name), or undefined when there is no such workspace. */
export const tenantName = async (sql: Sql, tenantId: number): Promise<string | undefined> =>
  (await sql<{ name: string }[]>`select name from tenants where id = ${tenantId}`)[0]?.name

export const secretExists = async (sql: Sql, name: string): Promise<boolean> =>
  (await sql`select 1 from system_secrets where name = ${name}`).length > 0

export async function insertMessage(
  sql: Sql,
  m: { tenantId: number; to: string; channel: string; category: string; template: string | null; subject: string },
): Promise<number> {
  const [row] = await sql<[{ id: number }]>`
    insert into email_messages (tenant_id, to_email, channel, category, template, subject, state)
    values (${m.tenantId}, ${m.to}, ${m.channel}, ${m.category}, ${m.template}, ${m.subject}, 'queued')
    returning id`
  return row.id
}

/** The message object of an outreach message's events, and its category (transactional mail sends none). */
const messageColumns = (sql: Q) => sql`id, tenant_id, to_email, channel, subject, state, provider,
  provider_message_id, created_at, updated_at, category`

type MessageChange = MessageObjectRow & { readonly category: string }

/** message.sent / .delivered / .replied for the outreach messages among `rows`, in the caller's transaction. */
const emitMessageEvents = (sql: Q, type: Parameters<typeof messageEvent>[0], rows: readonly MessageChange[]) =>
  emitEvents(
    sql,
    rows.filter((m) => m.category === "outreach").map((m) => messageEvent(type, m)),
  )

export async function markSent(sql: Sql, id: number, provider: string, providerMessageId: string): Promise<void> {
  await sql.begin(async (tx) => {
    const rows = await tx<MessageChange[]>`
      update email_messages set state = 'sent', provider = ${provider}, provider_message_id = ${providerMessageId},
        updated_at = now()
      where id = ${id} and state = 'queued'
      returning ${messageColumns(tx)}`
    await emitMessageEvents(tx, "message.sent", rows)
  })
}

/** A reply to an outreach message (an email provider's event): its message.replied. */
export async function recordReply(sql: Tx, id: number): Promise<void> {
  const rows = await sql<MessageChange[]>`select ${messageColumns(sql)} from email_messages where id = ${id}`
  await emitMessageEvents(sql, "message.replied", rows)
}

export async function markFailed(sql: Sql, id: number, error: string): Promise<void> {
  await sql`update email_messages set state = 'failed', error = ${error}, updated_at = now() where id = ${id}`
}

export async function messageByProviderId(sql: Q, providerMessageId: string): Promise<MessageRow | undefined> {
  const [row] = await sql<MessageRow[]>`
    select id, tenant_id, to_email, channel, state, provider_message_id from email_messages
    where provider_message_id = ${providerMessageId}`
  return row
}

/**
 * Moves a message to a delivery state. Delivered only from sent; bounced / complained from sent or
 * delivered (a complaint arrives after delivery); opened and clicked stamp their time and imply
 * delivery of a sent message.
 */
export async function applyDeliveryEvent(
  sql: Q,
  id: number,
  event: "delivered" | "opened" | "clicked" | "bounced" | "complained",
): Promise<void> {
  switch (event) {
    case "delivered": {
      const rows = await sql<MessageChange[]>`update email_messages set state = 'delivered', updated_at = now()
        where id = ${id} and state = 'sent' returning ${messageColumns(sql)}`
      await emitMessageEvents(sql, "message.delivered", rows)
      return
    }
    case "opened":
    case "clicked": {
      const col = event === "opened" ? sql`opened_at` : sql`clicked_at`
      // An open or a click proves a delivery the provider never reported: message.delivered then.
      const rows = await sql<(MessageChange & { was_sent: boolean })[]>`
        update email_messages m set ${col} = coalesce(m.${col}, now()), updated_at = now(),
          state = case when m.state = 'sent' then 'delivered' else m.state end
        from (select id as oid, state = 'sent' as was_sent from email_messages where id = ${id} for update) o
        where m.id = o.oid
        returning o.was_sent, ${messageColumns(sql)}`
      await emitMessageEvents(
        sql,
        "message.delivered",
        rows.filter((r) => r.was_sent),
      )
      return
    }
    default:
      await sql`
        update email_messages set state = ${event}, updated_at = now()
        where id = ${id} and state in ('sent', 'delivered', 'queued')`
  }
}

export async function addEvent(
  sql: Q,
  e: { tenantId: number; to: string; messageId: number | null; kind: string; channel: string | null; detail?: string },
): Promise<void> {
  await sql`
    insert into email_events (tenant_id, to_email, message_id, kind, channel, detail)
    values (${e.tenantId}, ${e.to}, ${e.messageId}, ${e.kind}, ${e.channel}, ${e.detail ?? null})`
}

/** Why outreach on `channel` may not go to the address: a suppression, a channel opt-out, or none. */
export async function blockOf(
  sql: Sql,
  tenantId: number,
  email: string,
  channel: string,
): Promise<{ reason: string; scope: "global" | "workspace" | "channel" } | undefined> {
  const [s] = await sql<{ tenant_id: number; reason: string }[]>`
    select tenant_id, reason from email_suppressions
    where email = ${email} and tenant_id in (${GLOBAL_TENANT}, ${tenantId})
    order by tenant_id limit 1`
  if (s !== undefined) return { reason: s.reason, scope: s.tenant_id === GLOBAL_TENANT ? "global" : "workspace" }
  const [p] = await sql<{ subscribed: boolean }[]>`
    select subscribed from email_preferences
    where tenant_id = ${tenantId} and email = ${email} and channel = ${channel}`
  return p !== undefined && !p.subscribed ? { reason: "unsubscribed", scope: "channel" } : undefined
}

export async function setPreference(
  sql: Sql,
  tenantId: number,
  email: string,
  channel: string,
  subscribed: boolean,
): Promise<boolean> {
  const rows = await sql`
    insert into email_preferences (tenant_id, email, channel, subscribed) values (${tenantId}, ${email}, ${channel},
      ${subscribed})
    on conflict (tenant_id, email, channel) do update set subscribed = excluded.subscribed, updated_at = now()
      where email_preferences.subscribed <> excluded.subscribed
    returning 1`
  return rows.length > 0
}

export interface PreferenceRow {
  readonly channel: string
  readonly subscribed: boolean
}

/** Every channel the workspace used or the address chose for, with its state (default subscribed). */
export async function preferences(sql: Sql, tenantId: number, email: string): Promise<PreferenceRow[]> {
  return sql<PreferenceRow[]>`
    select channel, bool_and(subscribed) as subscribed from (
      select channel, subscribed from email_preferences where tenant_id = ${tenantId} and email = ${email}
      union all
      select distinct m.channel, coalesce(p.subscribed, true) from email_messages m
        left join email_preferences p on p.tenant_id = m.tenant_id and p.email = m.to_email and p.channel = m.channel
        where m.tenant_id = ${tenantId} and m.to_email = ${email} and m.category = 'outreach'
    ) c group by channel order by channel`
}

export async function suppressions(
  sql: Sql,
  tenantId: number,
  email: string,
): Promise<Array<{ tenant_id: number; reason: SuppressionReason }>> {
  return sql<Array<{ tenant_id: number; reason: SuppressionReason }>>`
    select tenant_id, reason from email_suppressions
    where email = ${email} and tenant_id in (${GLOBAL_TENANT}, ${tenantId}) order by tenant_id`
}

/** Suppresses the address (idempotent; the first reason stays); true when it was not suppressed. */
export async function suppress(
  sql: Q,
  tenantId: number,
  email: string,
  reason: SuppressionReason,
  source: string,
): Promise<boolean> {
  const rows = await sql`
    insert into email_suppressions (tenant_id, email, reason, source) values (${tenantId}, ${email}, ${reason},
      ${source})
    on conflict (tenant_id, email) do nothing returning 1`
  return rows.length > 0
}

/** Lifts a workspace unsubscribe (the address asked back in); bounces and complaints stay. */
export async function liftUnsubscribe(sql: Sql, tenantId: number, email: string): Promise<void> {
  await sql`
    delete from email_suppressions where tenant_id = ${tenantId} and email = ${email} and reason = 'unsubscribe'`
}

/** Counts a soft bounce for the address; the new count. */
export async function countSoftBounce(sql: Q, email: string): Promise<number> {
  const [row] = await sql<[{ count: number }]>`
    insert into email_soft_bounces (email, count) values (${email}, 1)
    on conflict (email) do update set count = email_soft_bounces.count + 1, last_at = now()
    returning count`
  return row.count
}

/** Records a webhook event; false when it was seen before (nothing more to do). */
export async function recordWebhookEvent(
  sql: Q,
  e: {
    provider: string
    dedupKey: string
    event: string
    email: string | null
    providerMessageId: string | null
    known: boolean
    payload: unknown
  },
): Promise<boolean> {
  const rows = await sql`
    insert into email_webhook_events (provider, dedup_key, event, email, provider_message_id, known, payload)
    values (${e.provider}, ${e.dedupKey}, ${e.event}, ${e.email}, ${e.providerMessageId}, ${e.known},
      ${sql.json(e.payload as never)})
    on conflict (provider, dedup_key) do nothing returning 1`
  return rows.length > 0
}

/**
 * A data-subject erase (src/dsr/): the address's events, preferences and suppressions go (the erase's
 * hash suppresses it instead), its messages are kept (billing) with the marker for the address; an
 * email's soft-bounce count and provider webhooks naming it go too. The rows per table.
 */
export async function eraseContactEmail(
  tx: Tx,
  m: ContactMatch,
): Promise<{ email_events: number; email_messages: number; email_preferences: number; email_suppressions: number }> {
  const T = m.tenantId
  const id = m.identifier
  const events = await tx`delete from email_events where tenant_id = ${T} and lower(to_email) = ${id}`
  const messages = await tx`
    update email_messages set to_email = ${m.marker}, subject = ${m.scrub("subject")}, error = ${m.scrub("error")}
    where tenant_id = ${T} and lower(to_email) = ${id}`
  const preferences = await tx`delete from email_preferences where tenant_id = ${T} and lower(email) = ${id}`
  const suppressions = await tx`delete from email_suppressions where tenant_id = ${T} and lower(email) = ${id}`
  if (m.kind === "email") {
    await tx`delete from email_soft_bounces where email = ${id}`
    await tx`delete from email_webhook_events where lower(email) = ${id} or ${m.mentions("payload")}`
  }
  return {
    email_events: events.count,
    email_messages: messages.count,
    email_preferences: preferences.count,
    email_suppressions: suppressions.count,
  }
}
