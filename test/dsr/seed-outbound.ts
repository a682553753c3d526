// Seeds what the post-call analysis and the webhook outbox hold about a contact's call, and the same
// for another contact's call of the workspace (which an erase must leave alone): one call_analyses
// row each, and events as src/webhooks/outbox.repo.ts records them ({id, type, created_at, tenant_id,
// data}) with one delivery each to an endpoint of the workspace. Shared by test/dsr/erase.test.ts and
// test/dsr/export.test.ts.
//
// The contact's events: call.completed (data names the call and its phone), call.analyzed (names only
// the call: found by call_id), message.delivered (names only the address). Deliveries are queued for
// tomorrow, so a runtime process of the test server does not post them meanwhile; call.completed's
// was already delivered (with its attempt row). The endpoint subscribes to these types only: the
// workspace's own events (wallet.low …) get no delivery.
import type { Sql } from "../../src/platform/Db.js"

export interface OutboundIds {
  readonly otherCallId: number
  readonly endpointId: number
  /** Every event seeded here (the workspace emits its own too, e.g. wallet.low). */
  readonly all: readonly string[]
  /** The contact's events, by type. */
  readonly events: { readonly completed: string; readonly analyzed: string; readonly message: string }
  readonly otherEvent: string
}

const body = (id: string, tenantId: number, type: string, data: Record<string, unknown>) => ({
  id,
  type,
  created_at: "2026-11-25T03:00:00.000Z",
  tenant_id: tenantId,
  data,
})

export async function seedOutbound(
  sql: Sql,
  c: {
    readonly tenantId: number
    readonly workflowId: number
    readonly runId: number
    readonly callId: number
    readonly phone: string
    readonly email: string
    /** The other contact's phone (its digits must not contain the contact's). */
    readonly otherPhone: string
  },
): Promise<OutboundIds> {
  const t = c.tenantId
  const [target] = await sql<[{ id: number }]>`
    insert into audience_targets (tenant_id, workflow_id, phone_e164, name)
    values (${t}, ${c.workflowId}, ${c.otherPhone}, 'Ravi') returning id`
  const [rt] = await sql<[{ id: number }]>`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
    values (${t}, ${c.runId}, ${target!.id}, ${c.otherPhone}, 'done') returning id`
  const [other] = await sql<[{ id: number }]>`
    insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
      owner_instance, status)
    values (${t}, ${c.runId}, ${c.workflowId}, ${rt!.id}, ${target!.id}, 1, ${c.otherPhone}, 'sim', 'test', 'ended')
    returning id`
  const otherCallId = other!.id
  await sql`
    insert into call_analyses (call_id, tenant_id, run_id, status, summary, goal_met, sentiment, fields,
      agreed_value_minor, analyzed_at)
    values
      (${c.callId}, ${t}, ${c.runId}, 'done', 'Agreed to renew; asked for the receipt by mail.', true, 'positive',
        ${sql.json({ email: c.email, alt_phone: `0${c.phone.slice(3)}` })}, 120000, now()),
      (${otherCallId}, ${t}, ${c.runId}, 'done', 'Declined.', false, 'neutral',
        ${sql.json({ alt_phone: c.otherPhone })}, null, now())`
  // Answered and just ended, after the rows exist: the analysis sweep would pick up such a call
  // lacking a row (a runtime process of the test server sweeps too).
  await sql`
    update calls set answered_at = now(), ended_at = now()
    where id in (${c.callId}, ${otherCallId})`
  const [ep] = await sql<[{ id: number }]>`
    insert into webhook_endpoints (tenant_id, url, events, secret_ciphertext)
    values (${t}, 'https://hooks.example.com/parley', ${["call.completed", "call.analyzed", "message.delivered"]},
      'not-a-real-ciphertext')
    returning id`
  const events = { completed: `evt_${t}_completed`, analyzed: `evt_${t}_analyzed`, message: `evt_${t}_message` }
  const otherEvent = `evt_${t}_other`
  const rows = [
    body(events.completed, t, "call.completed", { call_id: c.callId, phone: c.phone, name: "Meera", version: 1 }),
    body(events.analyzed, t, "call.analyzed", { call_id: c.callId, summary: "Agreed to renew.", fields: {} }),
    body(events.message, t, "message.delivered", { id: 7, to: c.email, version: 2 }),
    body(otherEvent, t, "call.completed", { call_id: otherCallId, phone: c.otherPhone, name: "Ravi", version: 3 }),
  ]
  for (const r of rows)
    await sql`
      insert into webhook_events (id, tenant_id, type, body) values (${r.id}, ${t}, ${r.type}, ${sql.json(r as never)})`
  const [done] = await sql<[{ id: number }]>`
    insert into webhook_deliveries (tenant_id, event_id, endpoint_id, status, attempts, next_attempt_at, delivered_at)
    values (${t}, ${events.completed}, ${ep!.id}, 'delivered', 1, null, now()) returning id`
  await sql`
    insert into webhook_attempts (tenant_id, delivery_id, endpoint_id, event_id, attempt, started_at, status_code,
      outcome)
    values (${t}, ${done!.id}, ${ep!.id}, ${events.completed}, 1, now(), 200, 'delivered')`
  for (const id of [events.analyzed, events.message, otherEvent])
    await sql`
      insert into webhook_deliveries (tenant_id, event_id, endpoint_id, next_attempt_at)
      values (${t}, ${id}, ${ep!.id}, now() + interval '1 day')`
  const all = [events.completed, events.analyzed, events.message, otherEvent]
  return { otherCallId, endpointId: ep!.id, all, events, otherEvent }
}
