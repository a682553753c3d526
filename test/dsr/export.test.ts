// POST /dsr/export through the real server: one row of every registered contact-bearing table is
// seeded for a contact and found (by phone in any format, by email in any case); an unknown contact
// gets the same shape, empty; bad identifiers are 422; API keys are refused; each export is recorded
// in dsr_requests by hash, never by the identifier.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { CONTACT_TABLES } from "../../src/dsr/contact-tables.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { seedOutbound } from "./seed-outbound.js"

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Bundle = Record<string, Record<string, unknown>[]>
interface Exported {
  contact: { kind: string; identifier: string }
  generated_at: string
  receipt_id: string
  bundle: Bundle
  recordings_zip_url?: string
}

const exportOf = (s: Session | string, contact_identifier: unknown) =>
  a.call("POST", "/dsr/export", { token: typeof s === "string" ? s : s.token, body: { contact_identifier } })

async function ok(res: Response): Promise<Exported> {
  const b = await res.json()
  if (res.status !== 200) throw new Error(`expected 200, got ${res.status}: ${JSON.stringify(b)}`)
  return b as Exported
}

const PHONE = "+919876543210"
const EMAIL = "Asha.Rao@Example.com"
const email = EMAIL.toLowerCase()
/** Another contact of the same workspace: never in the contact's export. */
const OTHER = "+919800000001"

/** One row of every registered table for the contact (PHONE, EMAIL) in the session's workspace. */
async function seed(s: Session) {
  const sql = srv.sql
  const t = s.tenantId
  const [w] = await sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt, compliance)
    values (${t}, 'Renewals', 'priya', 'call them',
      ${sql.json({ consent_attestation_text: "Opted in at checkout", consent_attested_at: "2026-01-01T00:00:00Z" })})
    returning id`
  const [run] = await sql<
    [{ id: number }]
  >`insert into runs (tenant_id, workflow_id) values (${t}, ${w!.id}) returning id`
  const [target] = await sql<[{ id: number }]>`
    insert into audience_targets (tenant_id, workflow_id, phone_e164, name, fields)
    values (${t}, ${w!.id}, ${PHONE}, 'Asha', ${sql.json({ email: EMAIL, plan: "gold" })}) returning id`
  const [upload] = await sql<[{ id: number }]>`
    insert into audience_uploads (tenant_id, workflow_id, format) values (${t}, ${w!.id}, 'csv') returning id`
  await sql`insert into audience_staging (upload_id, line_no, phone_e164) values (${upload!.id}, 1, ${PHONE})`
  const [rt] = await sql<[{ id: number }]>`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
    values (${t}, ${run!.id}, ${target!.id}, ${PHONE}, 'done') returning id`
  const [call] = await sql<[{ id: number }]>`
    insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
      owner_instance, status)
    values (${t}, ${run!.id}, ${w!.id}, ${rt!.id}, ${target!.id}, 1, ${PHONE}, 'sim', 'test', 'ended') returning id`
  const [turn] = await sql<[{ id: number }]>`
    insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
    values (${t}, ${run!.id}, ${target!.id}, ${call!.id}, 1, 0, 'agent', 'Hello Asha', now()) returning id`
  await sql`
    insert into dial_decisions (tenant_id, run_id, target_id, call_id, decision, reason)
    values (${t}, ${run!.id}, ${target!.id}, ${call!.id}, 'dial', 'due')`
  await sql`
    insert into approvals (tenant_id, workflow_id, run_id, call_id, target_phone, proposed_action, currency, expires_at)
    values (${t}, ${w!.id}, ${run!.id}, ${call!.id}, ${PHONE}, 'concession', 'INR', now() + interval '1 hour')`
  await sql`insert into dnc_entries (tenant_id, phone_e164, source) values (${t}, ${PHONE}, 'call')`
  await sql`insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values (${t}, ${PHONE}, now())`
  await sql`
    insert into inbound_calls (tenant_id, number_id, provider, provider_call_id, from_e164, to_e164)
    values (${t}, 1, 'sim', ${`in-${t}`}, ${PHONE}, '+14155550100')`
  const [fb] = await sql<[{ id: number }]>`
    insert into kb_feedback (tenant_id, turn_id, run_id, workflow_id, reviewer, verdict, line, line_key)
    values (${t}, ${turn!.id}, ${run!.id}, ${w!.id}, ${`user:${s.userId}`}, 'reward', 'Hello {name}', 'hello name')
    returning id`
  await sql`
    insert into kb_events (tenant_id, workflow_id, action, feedback_id)
    values (${t}, ${w!.id}, 'feedback', ${fb!.id})`
  await sql`
    insert into usage_events (tenant_id, event_id, kind, quantity, unit, at, attributes)
    values (${t}, ${`ev-${t}`}, 'sms.sent', 1, 'message', now(), ${sql.json({ to: "+91 98765 43210" })})`
  const [msg] = await sql<[{ id: number }]>`
    insert into email_messages (tenant_id, to_email, channel, category, subject, state, provider, provider_message_id)
    values (${t}, ${email}, 'offers', 'outreach', 'Your renewal', 'sent', 'mail_a', ${`pm-${t}`}) returning id`
  await sql`
    insert into email_events (tenant_id, to_email, message_id, kind, channel)
    values (${t}, ${email}, ${msg!.id}, 'sent', 'offers')`
  await sql`
    insert into email_preferences (tenant_id, email, channel, subscribed) values (${t}, ${email}, 'offers', false)`
  await sql`
    insert into email_suppressions (tenant_id, email, reason, source) values (${t}, ${email}, 'unsubscribe', 'link')`
  await sql`
    insert into email_soft_bounces (email, count) values (${email}, 1)
    on conflict (email) do update set count = email_soft_bounces.count + 1`
  await sql`
    insert into email_webhook_events (provider, dedup_key, event, email, provider_message_id, known, payload)
    values ('mail_a', ${`ev-${t}`}, 'delivered', ${email}, ${`pm-${t}`}, true, ${sql.json({ to: email })})`
  const [src] = await sql<[{ id: number }]>`
    insert into data_sources (tenant_id, name, kind, status) values (${t}, 'Shop', 'csv', 'ready') returning id`
  await sql`
    insert into data_source_rows (source_id, row_no, data) values
      (${src!.id}, 1, ${sql.json({ phone: "098765 43210", email: EMAIL, total: "1200" })}),
      (${src!.id}, 2, ${sql.json({ phone: "+91 99999 00000", email: "someone@else.com" })})`
  await sql`
    insert into data_source_messages (tenant_id, source_id, role, text)
    values (${t}, ${src!.id}, 'agent', ${`Asha (${PHONE}) spent the most.`})`
  const outbound = await seedOutbound(sql, {
    tenantId: t,
    workflowId: w!.id,
    runId: run!.id,
    callId: call!.id,
    phone: PHONE,
    email,
    otherPhone: OTHER,
  })
  // An event of no call that quotes the number in another format (found by its digits), and one whose
  // only likeness is the digits inside a longer number (not the contact's).
  const quoted = `evt_${t}_quoted`
  const longer = `evt_${t}_longer`
  for (const [id, data] of [
    [quoted, { id: 5, call_id: null, context: { callee: "09876543210" } }],
    [longer, { id: 6, call_id: null, context: { callee: OTHER }, version: 19876543210 }],
  ] as const)
    await sql`
      insert into webhook_events (id, tenant_id, type, body)
      values (${id}, ${t}, 'approval.requested', ${sql.json({ id, type: "approval.requested", tenant_id: t, data })})`
  return {
    workflowId: w!.id,
    runId: run!.id,
    targetId: target!.id,
    callId: call!.id,
    turnId: turn!.id,
    outbound,
    quoted,
  }
}

describe("POST /dsr/export", () => {
  let owner: Session
  let ids: Awaited<ReturnType<typeof seed>>
  beforeAll(async () => {
    owner = await a.signup({ country: "IN" })
    ids = await seed(owner)
  })

  it("finds the contact by phone in every registered section", async () => {
    const out = await ok(await exportOf(owner, PHONE))
    expect(out.contact).toEqual({ kind: "phone", identifier: PHONE })
    expect(Math.abs(new Date(out.generated_at).getTime() - Date.now())).toBeLessThan(60_000)
    expect(out.recordings_zip_url).toBeUndefined()
    const b = out.bundle
    expect(b["targets"]!.map((r) => r["id"])).toEqual([ids.targetId])
    expect(b["targets"]![0]).toMatchObject({ phone_e164: PHONE, name: "Asha", fields: { email: EMAIL, plan: "gold" } })
    expect(b["run_targets"]).toHaveLength(1)
    expect(b["calls"]!.map((r) => r["id"])).toEqual([ids.callId])
    expect(b["turns"]!.map((r) => r["text"])).toEqual(["Hello Asha"])
    expect(b["approvals"]![0]).toMatchObject({ target_phone: PHONE, status: "pending" })
    expect(b["dnc"]![0]).toMatchObject({ phone_e164: PHONE, source: "call" })
    expect(b["cooldown"]![0]).toMatchObject({ phone_e164: PHONE })
    expect(b["consent"]![0]).toMatchObject({
      workflow_id: ids.workflowId,
      compliance: { consent_attestation_text: "Opted in at checkout" },
    })
    expect(b["inbound_calls"]![0]).toMatchObject({ from_e164: PHONE })
    expect(b["dial_decisions"]![0]).toMatchObject({ target_id: ids.targetId, decision: "dial" })
    expect(b["kb_feedback"]![0]).toMatchObject({ turn_id: ids.turnId, verdict: "reward" })
    expect(b["kb_events"]![0]).toMatchObject({ action: "feedback" })
    expect(b["usage_events"]![0]).toMatchObject({ kind: "sms.sent", attributes: { to: "+91 98765 43210" } })
    expect(b["data_source_rows"]!.map((r) => r["row_no"])).toEqual([1])
    expect(b["data_source_messages"]).toHaveLength(1)
    expect(b["timeline"]!.length).toBeGreaterThan(0)
    expect(b["timeline"]!.map((e) => e["kind"])).toEqual(expect.arrayContaining(["call", "dnc"]))
    expect(b["call_analyses"]).toHaveLength(1)
    expect(b["call_analyses"]![0]).toMatchObject({
      call_id: ids.callId,
      status: "done",
      summary: "Agreed to renew; asked for the receipt by mail.",
      fields: { email, alt_phone: "09876543210" },
      agreed_value_minor: 120000,
    })
    expect(b["call_analyses"]![0]).not.toHaveProperty("locked_by")
    // By the call (call.completed, call.analyzed) and by the number in the body; not the other contact's.
    const { events } = ids.outbound
    expect(b["webhook_events"]!.map((e) => e["id"]).sort()).toEqual(
      [events.completed, events.analyzed, ids.quoted].sort(),
    )
    const completed = b["webhook_events"]!.find((e) => e["id"] === events.completed)!
    expect(completed).toMatchObject({
      type: "call.completed",
      body: { type: "call.completed", data: { call_id: ids.callId, phone: PHONE } },
      deliveries: [{ endpoint_id: ids.outbound.endpointId, status: "delivered", attempts: 1 }],
    })
    const analyzed = b["webhook_events"]!.find((e) => e["id"] === events.analyzed)!
    expect(analyzed["deliveries"]).toEqual([
      { endpoint_id: ids.outbound.endpointId, status: "pending", attempts: 0, delivered_at: null },
    ])
    // Phone-only export: the email's rows are not this identifier's.
    expect(b["messages"]).toEqual([])
    expect(b["email_preferences"]).toEqual([])
    expect(b["demo_calls"]).toEqual([])
  })

  it("finds the contact by email, in any case, in every email section and the targets' JSONB", async () => {
    const out = await ok(await exportOf(owner, "  ASHA.RAO@example.COM "))
    expect(out.contact).toEqual({ kind: "email", identifier: email })
    const b = out.bundle
    expect(b["targets"]!.map((r) => r["id"])).toEqual([ids.targetId])
    expect(b["turns"]).toHaveLength(1)
    expect(b["messages"]![0]).toMatchObject({ to_email: email, subject: "Your renewal" })
    expect(b["email_events"]!.map((r) => r["kind"] ?? r["event"])).toEqual(["sent", "delivered"])
    expect(b["email_preferences"]![0]).toMatchObject({ email, channel: "offers", subscribed: false })
    expect(b["email_suppressions"]!.map((r) => r["reason"])).toEqual(["unsubscribe", "soft_bounce_count"])
    expect(b["data_source_rows"]!.map((r) => r["row_no"])).toEqual([1])
    // The analysis quotes the address; the events are the call's (its target holds the address) and
    // the message's.
    expect(b["call_analyses"]!.map((r) => r["call_id"])).toEqual([ids.callId])
    const { events } = ids.outbound
    expect(b["webhook_events"]!.map((e) => e["id"]).sort()).toEqual(
      [events.completed, events.analyzed, events.message].sort(),
    )
    expect(b["timeline"]!.every((e) => e["kind"] === "email")).toBe(true)
    expect(b["timeline"]!.length).toBeGreaterThan(0)
  })

  it("reads the phone in any format: national, with spaces, +country, 0-prefixed", async () => {
    for (const raw of ["9876543210", "98765 43210", "+91 98765-43210", "098765 43210", "(+91) 98765 43210"]) {
      const out = await ok(await exportOf(owner, raw))
      expect(out.contact.identifier, raw).toBe(PHONE)
      expect(out.bundle["calls"], raw).toHaveLength(1)
    }
  })

  it("answers an unknown contact with the same shape, every collection empty", async () => {
    const known = await ok(await exportOf(owner, PHONE))
    const out = await ok(await exportOf(owner, "+91 91234 56789"))
    expect(Object.keys(out.bundle).sort()).toEqual(Object.keys(known.bundle).sort())
    for (const [k, v] of Object.entries(out.bundle)) expect(v, k).toEqual([])
  })

  it("covers every section the registry names", async () => {
    const out = await ok(await exportOf(owner, PHONE))
    for (const t of CONTACT_TABLES) if (t.bundle !== null) expect(out.bundle, t.table).toHaveProperty(t.bundle)
  })

  it("does not show another workspace's rows", async () => {
    const other = await a.signup({ country: "IN" })
    const out = await ok(await exportOf(other, PHONE))
    for (const [k, v] of Object.entries(out.bundle)) expect(v, k).toEqual([])
  })

  it("422s an identifier that is neither a phone nor an email", async () => {
    for (const bad of ["not a number", "12", "a@b", "@example.com", ""]) {
      const res = await exportOf(owner, bad)
      expect(res.status, bad).toBe(422)
      expect(((await res.json()) as { code: string }).code).toBe("VALIDATION_FAILED")
    }
    const missing = await a.call("POST", "/dsr/export", { token: owner.token, body: {} })
    expect(missing.status).toBe(422)
  })

  it("records each export by hash, actor and counts, never the identifier", async () => {
    const out = await ok(await exportOf(owner, PHONE))
    const rows = await srv.sql<
      { action: string; actor: string; contact_hash: string; detail: Record<string, number> }[]
    >`
      select action, actor, contact_hash, detail from dsr_requests where receipt_id = ${out.receipt_id}`
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ action: "export", actor: `user:${owner.userId}` })
    expect(rows[0]!.contact_hash).toMatch(/^[0-9a-f]{64}$/)
    expect(rows[0]!.detail["calls"]).toBe(1)
    const all = await srv.sql`select * from dsr_requests where tenant_id = ${owner.tenantId}`
    expect(JSON.stringify(all)).not.toContain("9876543210")
  })

  it("is open to any role but refuses API keys (403 API_KEY_NOT_ALLOWED)", async () => {
    const key = await a.createKey(owner, { name: "admin key", scope: "admin" })
    const byKey = await exportOf(key.secret, PHONE)
    expect(byKey.status).toBe(403)
    expect(((await byKey.json()) as { code: string }).code).toBe("API_KEY_NOT_ALLOWED")
    const anon = await a.call("POST", "/dsr/export", { body: { contact_identifier: PHONE } })
    expect(anon.status).toBe(401)
    const member = await a.signup({ country: "IN" })
    await srv.sql`update users set role = 'analyst' where id = ${member.userId}`
    const again = await a.login(member.email, member.password)
    expect((await exportOf(again, PHONE)).status).toBe(200)
  })
})
