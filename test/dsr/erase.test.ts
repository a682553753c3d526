// POST /dsr/erase through the real server: one row of every registered contact-bearing table is seeded
// for a contact; after the erase no column of any table (text, JSONB) holds the phone or the email,
// rows kept for audit hold `erased:<hash>`, pending approvals are cancelled, the erase is on record by
// hash; a second erase changes nothing; the contact is refused on re-upload (rejected_erased), reported
// by the DNC check, refused as an outreach email recipient and skipped by the dialer; only signed-in
// owners and admins may erase.
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { enqueueEnded } from "../../src/analysis/analysis.repo.js"
import { Auth } from "../../src/auth/Auth.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { seedOutbound } from "./seed-outbound.js"

const SYSTEM_KEY = "system-key-for-dsr-tests"
let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await startTestServer({ env: { ...FAST_RUNTIME_ENV, SYSTEM_KEY } })
  a = api(srv)
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const PHONE = "+919812345678"
const DIGITS = "9812345678"
const EMAIL = "Meera.Iyer@Example.com"
const email = EMAIL.toLowerCase()
/** Another contact of the same workspace, whose rows every erase here must leave alone. */
const OTHER = "+919800000001"

const erase = async (s: Session | string, contact_identifier: unknown) => {
  const res = await a.call("POST", "/dsr/erase", {
    token: typeof s === "string" ? s : s.token,
    body: { contact_identifier },
  })
  return { status: res.status, body: (await res.json()) as Json }
}

/** One row of every registered table for the contact in the session's workspace. */
async function seed(s: Session) {
  const sql = srv.sql
  const t = s.tenantId
  const [w] = await sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt) values (${t}, 'Renewals', 'priya', 'call them')
    returning id`
  const [run] = await sql<[{ id: number }]>`
    insert into runs (tenant_id, workflow_id, snapshot) values (${t}, ${w!.id}, ${sql.json({ phone: PHONE })})
    returning id`
  const [target] = await sql<[{ id: number }]>`
    insert into audience_targets (tenant_id, workflow_id, phone_e164, name, fields)
    values (${t}, ${w!.id}, ${PHONE}, 'Meera', ${sql.json({ email: EMAIL, plan: "gold" })}) returning id`
  // A kept Idempotency-Key answer that repeats the number (e.g. a DNC entry added with a key).
  await sql`
    insert into idempotency_keys
      (tenant_id, key, fingerprint, claim_token, state, status, content_type, body, expires_at)
    values (${t}, 'dnc-add-1', '\\x00', 'done', 'done', 201, 'application/json',
      ${Buffer.from(JSON.stringify({ phone: PHONE }))}, now() + interval '1 day')`
  const [upload] = await sql<[{ id: number }]>`
    insert into audience_uploads (tenant_id, workflow_id, format) values (${t}, ${w!.id}, 'csv') returning id`
  await sql`insert into audience_staging (upload_id, line_no, phone_e164) values (${upload!.id}, 1, ${PHONE})`
  const [rt] = await sql<[{ id: number }]>`
    insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
    values (${t}, ${run!.id}, ${target!.id}, ${PHONE}, 'done') returning id`
  const [call] = await sql<[{ id: number }]>`
    insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
      owner_instance, status, cost_minor)
    values (${t}, ${run!.id}, ${w!.id}, ${rt!.id}, ${target!.id}, 1, ${PHONE}, 'sim', 'test', 'ended', 120)
    returning id`
  const [turn] = await sql<[{ id: number }]>`
    insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
    values (${t}, ${run!.id}, ${target!.id}, ${call!.id}, 1, 0, 'callee', ${`Mail me at ${EMAIL}`}, now())
    returning id`
  await sql`
    insert into dial_decisions (tenant_id, run_id, target_id, call_id, decision, reason, detail)
    values (${t}, ${run!.id}, ${target!.id}, ${call!.id}, 'dial', 'due', ${sql.json({ to: PHONE })})`
  const [approval] = await sql<[{ id: number }]>`
    insert into approvals (tenant_id, workflow_id, run_id, call_id, target_phone, proposed_action, currency,
      expires_at, context)
    values (${t}, ${w!.id}, ${run!.id}, ${call!.id}, ${PHONE}, 'concession', 'INR', now() + interval '1 hour',
      ${sql.json({ callee: PHONE, email: EMAIL })})
    returning id`
  await sql`insert into dnc_entries (tenant_id, phone_e164, source) values (${t}, ${PHONE}, 'call')`
  await sql`insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values (${t}, ${PHONE}, now())`
  await sql`
    insert into inbound_calls (tenant_id, number_id, provider, provider_call_id, from_e164, to_e164)
    values (${t}, 1, 'sim', ${`in-${t}`}, ${PHONE}, '+14155550100')`
  const [fb] = await sql<[{ id: number }]>`
    insert into kb_feedback (tenant_id, turn_id, run_id, workflow_id, reviewer, verdict, line, line_key)
    values (${t}, ${turn!.id}, ${run!.id}, ${w!.id}, ${`user:${s.userId}`}, 'reward', 'Hello {name}', 'hello name')
    returning id`
  const [rule] = await sql<[{ id: number }]>`
    insert into kb_rules (tenant_id, bucket, title, body, status, source_kind)
    values (${t}, 'tone', 'Be brief', 'be brief', 'active', 'feedback') returning id`
  await sql`insert into kb_rule_feedback (rule_id, feedback_id) values (${rule!.id}, ${fb!.id})`
  await sql`
    insert into usage_events (tenant_id, event_id, kind, quantity, unit, at, attributes)
    values (${t}, ${`ev-${t}`}, 'sms.sent', 1, 'message', now(), ${sql.json({ to: PHONE })})`
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
  await sql`insert into email_soft_bounces (email, count) values (${email}, 1) on conflict (email) do nothing`
  await sql`
    insert into email_webhook_events (provider, dedup_key, event, email, provider_message_id, known, payload)
    values ('mail_a', ${`ev-${t}`}, 'delivered', ${email}, ${`pm-${t}`}, true, ${sql.json({ to: email })})`
  const [src] = await sql<[{ id: number }]>`
    insert into data_sources (tenant_id, name, kind, status) values (${t}, 'Shop', 'csv', 'ready') returning id`
  await sql`
    insert into data_source_rows (source_id, row_no, data) values
      (${src!.id}, 1, ${sql.json({ phone: "098123 45678", total: "1200" })}),
      (${src!.id}, 2, ${sql.json({ email: EMAIL, total: "900" })}),
      (${src!.id}, 3, ${sql.json({ phone: "+91 99999 00000", email: "someone@else.com" })})`
  await sql`
    insert into data_source_messages (tenant_id, source_id, role, text)
    values (${t}, ${src!.id}, 'agent', ${`Meera (${PHONE}) spent the most.`})`
  const outbound = await seedOutbound(sql, {
    tenantId: t,
    workflowId: w!.id,
    runId: run!.id,
    callId: call!.id,
    phone: PHONE,
    email,
    otherPhone: OTHER,
  })
  return { workflowId: w!.id, runId: run!.id, callId: call!.id, approvalId: approval!.id, outbound }
}

/** Every (table, column) of text, varchar or JSON type in the schema whose value mentions `needle`. */
async function mentionsAnywhere(needle: string): Promise<string[]> {
  const cols = await srv.sql<{ table_name: string; column_name: string }[]>`
    select c.table_name, c.column_name from information_schema.columns c
    join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
    where c.table_schema = current_schema() and t.table_type = 'BASE TABLE'
      and c.data_type in ('text', 'character varying', 'jsonb', 'json')`
  const found: string[] = []
  for (const c of cols) {
    const [r] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from ${srv.sql(c.table_name)}
      where lower(${srv.sql(c.column_name)}::text) like ${`%${needle.toLowerCase()}%`}`
    if (r!.n > 0) found.push(`${c.table_name}.${c.column_name}`)
  }
  return found
}

async function invalidate(s: Session) {
  await srv.running.runtime.runPromise(
    Effect.flatMap(Auth, (auth) => Effect.promise(() => auth.invalidate({ kind: "user", userId: s.userId }))),
  )
}

describe("POST /dsr/erase", () => {
  let owner: Session
  let ids: Awaited<ReturnType<typeof seed>>
  let first: Json
  beforeAll(async () => {
    owner = await a.signup({ country: "IN" })
    ids = await seed(owner)
    expect((await mentionsAnywhere(DIGITS)).length).toBeGreaterThan(5)
  })

  it("erases by phone (any format): nothing holds the number, audit rows keep the hash", async () => {
    const r = await erase(owner, "098123 45678")
    expect(r.status).toBe(200)
    first = r.body
    expect(first.receipt_id).toMatch(/^dsr_/)
    expect(Math.abs(new Date(first.erased_at).getTime() - Date.now())).toBeLessThan(60_000)
    expect(first.erased).toMatchObject({
      audience_targets: 1,
      turns: 1,
      kb_feedback: 1,
      calls: 1,
      run_targets: 1,
      approvals_cancelled: 1,
      approvals: 1,
      dnc_entries: 1,
      recent_contacts: 1,
      inbound_calls: 1,
      dial_decisions: 1,
      usage_events: 1,
      runs: 1,
      data_source_rows: 1,
      data_source_messages: 1,
      idempotency_keys: 1,
      call_analyses: 1,
      // call.completed (by its phone and call) and call.analyzed (by call); message.* names the address
      webhook_events: 2,
      webhook_deliveries_pending: 1,
    })
    expect(await mentionsAnywhere(DIGITS)).toEqual([])
    expect(await srv.sql`select key from idempotency_keys where tenant_id = ${owner.tenantId}`).toEqual([])
    const [rec] = await srv.sql<[{ contact_hash: string; actor: string; action: string }]>`
      select contact_hash, actor, action from dsr_requests where receipt_id = ${first.receipt_id}`
    expect(rec).toMatchObject({ action: "erase", actor: `user:${owner.userId}` })
    expect(rec!.contact_hash).toMatch(/^[0-9a-f]{64}$/)
    const marker = `erased:${rec!.contact_hash}`
    expect(await srv.sql`select phone_e164 from dnc_entries where tenant_id = ${owner.tenantId}`).toEqual([
      { phone_e164: marker },
    ])
    expect(await srv.sql`select phone_e164 from calls where id = ${ids.callId}`).toEqual([{ phone_e164: marker }])
    const [ap] = await srv.sql<[{ status: string; target_phone: string }]>`
      select status, target_phone from approvals where id = ${ids.approvalId}`
    expect(ap).toEqual({ status: "denied", target_phone: marker })
    // Webhook receivers hear the cancellation, without the contact (mentionsAnywhere above covers the body).
    const resolved = await srv.sql<{ body: { data: Record<string, unknown> } }[]>`
      select body from webhook_events where tenant_id = ${owner.tenantId} and type = 'approval.resolved'`
    expect(resolved.map((r) => r.body.data)).toEqual([
      expect.objectContaining({ id: ids.approvalId, status: "denied", target_phone: marker, call_id: ids.callId }),
    ])
    expect(await srv.sql`select 1 from erased_contacts where tenant_id = ${owner.tenantId}`).toHaveLength(1)
  })

  it("erases the analyses and outbound events of the contact's calls, not the other contact's", async () => {
    const { outbound } = ids
    expect(await srv.sql`select call_id, summary from call_analyses where tenant_id = ${owner.tenantId}`).toEqual([
      { call_id: outbound.otherCallId, summary: "Declined." },
    ])
    const events = await srv.sql<{ id: string }[]>`
      select id from webhook_events where id = any(${outbound.all as string[]}) order by id`
    expect(events.map((e) => e.id)).toEqual([outbound.events.message, outbound.otherEvent].sort())
    // The queued delivery of the erased call's event is gone (cascade), with the sent one's attempt;
    // the other contact's and the address's (erased by its own request) are still queued.
    const deliveries = await srv.sql<{ event_id: string; status: string }[]>`
      select event_id, status from webhook_deliveries where endpoint_id = ${outbound.endpointId} order by event_id`
    expect(deliveries).toEqual(
      [outbound.events.message, outbound.otherEvent].sort().map((event_id) => ({ event_id, status: "pending" })),
    )
    expect(await srv.sql`select 1 from webhook_attempts where endpoint_id = ${outbound.endpointId}`).toEqual([])
  })

  it("does not enqueue the erased call for analysis again (its analysis would come back)", async () => {
    await enqueueEnded(srv.sql, new Date(Date.now() - 3_600_000), 500)
    const rows = await srv.sql<{ call_id: number }[]>`
      select call_id from call_analyses where tenant_id = ${owner.tenantId} order by call_id`
    expect(rows.map((r) => r.call_id)).toEqual([ids.outbound.otherCallId])
  })

  it("erases by email (any case): nothing holds the address", async () => {
    const r = await erase(owner, EMAIL.toUpperCase())
    expect(r.status).toBe(200)
    expect(r.body.erased).toMatchObject({
      email_messages: 1,
      email_events: 1,
      email_preferences: 1,
      email_suppressions: 1,
      data_source_rows: 1,
      // message.delivered names the address; the phone erase's approval.resolved quotes the approval's
      // context, which holds it too
      webhook_events: 2,
      webhook_deliveries_pending: 1,
    })
    expect(await mentionsAnywhere(email)).toEqual([])
    expect(await mentionsAnywhere(DIGITS)).toEqual([])
    // the unrelated rows stay
    expect(await mentionsAnywhere("someone@else.com")).toContain("data_source_rows.data")
    expect(await mentionsAnywhere(OTHER.slice(1))).toEqual(
      expect.arrayContaining(["call_analyses.fields", "webhook_events.body"]),
    )
    const [left] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from webhook_deliveries
      where event_id = ${ids.outbound.otherEvent} and status = 'pending'`
    expect(left!.n).toBe(1)
  })

  it("is idempotent: a second erase finds nothing and keeps the same suppression", async () => {
    const r = await erase(owner, PHONE)
    expect(r.status).toBe(200)
    expect(Object.values(r.body.erased as Record<string, number>).every((n) => n === 0)).toBe(true)
    expect(r.body.erased_at).toBe(first.erased_at)
    expect(r.body.receipt_id).not.toBe(first.receipt_id)
    expect(await srv.sql`select 1 from erased_contacts where tenant_id = ${owner.tenantId}`).toHaveLength(2)
  })

  it("refuses the erased number on re-upload (rejected_erased) and the DNC check reports it", async () => {
    const res = await a.call("POST", `/api/workflows/${ids.workflowId}/audience`, {
      token: owner.token,
      body: { rows: [{ phone: PHONE, name: "Meera" }, { phone: "+919812340000" }] },
    })
    const c = (await res.json()) as Json
    expect(res.status).toBe(200)
    expect(c).toMatchObject({ accepted: 1, rejected_erased: 1, rejected_dnc: 0 })
    expect(await mentionsAnywhere(DIGITS)).toEqual([])
    const chk = await a.call("GET", `/dnc/check?phone_e164=${encodeURIComponent(PHONE)}`, { token: owner.token })
    expect(await chk.json()).toMatchObject({ erased: true, would_be_filtered: true })
  })

  it("refuses outreach email to the erased address (RECIPIENT_SUPPRESSED, erased)", async () => {
    const res = await fetch(`${srv.url}/api/internal/outreach/email`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-system-key": SYSTEM_KEY,
        "x-tenant-id": String(owner.tenantId),
      },
      body: JSON.stringify({ to: EMAIL, subject: "Hi", text: "An offer" }),
    })
    expect(res.status).toBe(409)
    expect(await res.json()).toMatchObject({ code: "RECIPIENT_SUPPRESSED", reason: "erased" })
    expect(await mentionsAnywhere(email)).toEqual([])
  })

  it("does not suppress the contact in another workspace (hashes do not link)", async () => {
    const other = await a.signup({ country: "IN" })
    const chk = await a.call("GET", `/dnc/check?phone_e164=${encodeURIComponent(PHONE)}`, { token: other.token })
    expect(await chk.json()).toMatchObject({ erased: false })
    const hashes = await srv.sql<{ contact_hash: string; tenant_id: number }[]>`
      select contact_hash, tenant_id from dsr_requests`
    expect(hashes.every((h) => h.tenant_id === owner.tenantId)).toBe(true)
  })

  it("answers 422 for an identifier that is neither a phone nor an email", async () => {
    const r = await erase(owner, "not a contact")
    expect(r.status).toBe(422)
    expect(r.body.code).toBe("VALIDATION_FAILED")
  })

  it("refuses API keys (any scope) and members (403)", async () => {
    const s = await a.signup({ country: "IN" })
    for (const scope of ["write", "admin"]) {
      const key = await a.createKey(s, { name: scope, scope })
      const r = await erase(key.secret, PHONE)
      expect(r.status).toBe(403)
    }
    await srv.sql`update users set role = 'supervisor' where id = ${s.userId}`
    await invalidate(s)
    const r = await erase(s, PHONE)
    expect(r.status).toBe(403)
    expect(r.body.code).toBe("INSUFFICIENT_ROLE")
    await srv.sql`update users set role = 'admin' where id = ${s.userId}`
    await invalidate(s)
    expect((await erase(s, PHONE)).status).toBe(200)
    expect(await srv.sql`select 1 from dsr_requests where tenant_id = ${s.tenantId}`).toHaveLength(1)
  })
})

describe("the dialer", () => {
  const call = async (s: Session, method: string, path: string, body?: unknown) => {
    const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }

  it("skips an erased number that reached an audience without the attach check", async () => {
    const s = await a.signup({ country: "US" })
    const intent = (await call(s, "POST", "/billing/topup", { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const keep = "+12025550101"
    const gone = "+12025550111"
    const w = (await call(s, "POST", "/api/workflows", { nl_prompt: "Remind lapsed members about renewing." })).body
    expect((await call(s, "POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: keep }] })).status).toBe(200)
    expect((await erase(s, gone)).status).toBe(200)
    // A path that bypasses the attach filters (as a direct insert would).
    await srv.sql`
      insert into audience_targets (tenant_id, workflow_id, phone_e164) values (${s.tenantId}, ${w.id}, ${gone})`
    const att = await call(s, "PUT", `/api/workflows/${w.id}/compliance`, {
      consent_attestation_text: "All numbers opted in on our website.",
    })
    expect(att.status).toBe(200)
    const run = await call(s, "POST", `/api/workflows/${w.id}/run`)
    expect(run.status).toBeLessThan(300)
    const deadline = Date.now() + 20_000
    for (;;) {
      const rows = await srv.sql<{ reason: string }[]>`
        select reason from dial_decisions where tenant_id = ${s.tenantId} and decision = 'skip'`
      if (rows.some((r) => r.reason === "contact_erased")) break
      if (Date.now() > deadline) throw new Error(`no skip: ${JSON.stringify(rows)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(await srv.sql`select 1 from calls where tenant_id = ${s.tenantId} and phone_e164 = ${gone}`).toEqual([])
  })
})

describe("a live call with the contact", () => {
  let live: TestServer
  let b: ReturnType<typeof api>
  beforeAll(async () => {
    // real-time simulated calls, so the call is still up when the erase arrives
    live = await startTestServer({ env: { ...FAST_RUNTIME_ENV, SIM_TIME_SCALE: "1" } })
    b = api(live)
  })
  afterAll(async () => live?.stop())

  it("is ended through the runtime before the erase, and nothing is written back", async () => {
    const s = await b.signup({ country: "US" })
    const req = async (method: string, path: string, body?: unknown) => {
      const res = await b.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
      return { status: res.status, body: (await res.json()) as Json }
    }
    const intent = (await req("POST", "/billing/topup", { amount_minor: 1_000_000 })).body
    await b.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const phone = "+12025550123"
    const w = (await req("POST", "/api/workflows", { nl_prompt: "Remind lapsed members about renewing." })).body
    expect((await req("POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone, name: "Sam" }] })).status).toBe(200)
    await req("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "All opted in on our website." })
    expect((await req("POST", `/api/workflows/${w.id}/run`)).status).toBeLessThan(300)
    const deadline = Date.now() + 20_000
    let callId: number | undefined
    while (callId === undefined) {
      const [c] = await live.sql<[{ id: number }?]>`
        select id from calls where tenant_id = ${s.tenantId} and status = 'connected'`
      callId = c?.id
      if (callId === undefined && Date.now() > deadline) throw new Error("no call connected")
      await new Promise((r) => setTimeout(r, 50))
    }
    const started = Date.now()
    const res = await b.call("POST", "/dsr/erase", { token: s.token, body: { contact_identifier: phone } })
    expect(res.status).toBe(200)
    // well under LIVE_CALL_WAIT_MS: the runtime hung the call up (the callee would talk on)
    expect(Date.now() - started).toBeLessThan(2_500)
    const [row] = await live.sql<[{ status: string; phone_e164: string }]>`
      select status, phone_e164 from calls where id = ${callId}`
    expect(row!.status).toBe("ended")
    expect(row!.phone_e164).toMatch(/^erased:[0-9a-f]{64}$/)
    await new Promise((r) => setTimeout(r, 1000))
    const left = await live.sql`
      select 'recent_contacts' as t from recent_contacts where phone_e164 = ${phone}
      union all select 'calls' from calls where phone_e164 = ${phone}
      union all select 'run_targets' from run_targets where phone_e164 = ${phone}
      union all select 'audience_targets' from audience_targets where phone_e164 = ${phone}
      union all select 'turns' from turns where call_id = ${callId}
      union all select 'call_analyses' from call_analyses where call_id = ${callId} and status <> 'failed'
      union all select 'webhook_events' from webhook_events
        where body::text like ${`%${phone}%`} or (body -> 'data' ->> 'call_id') = ${String(callId)}`
    expect(left).toEqual([])
  })
})
