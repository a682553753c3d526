// The mail provider webhooks through the real server: mail_a (?key=) and mail_b (hex HMAC-SHA256
// of the raw body, underscore or hyphenated header), single events and arrays, bad keys and
// signatures (401, nothing changes), replay dedup, each event type's effect, the soft-bounce
// threshold, unknown message ids, and mail_a accepted without a key when no secret is configured.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SOFT_BOUNCE_LIMIT } from "../../src/email/email.webhooks.js"
import { api, type Session, SYSTEM_KEY, uniqueEmail } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { emailClient, type Json, MAIL_A_SECRET, MAIL_B_SECRET } from "./email.support.js"

let srv: TestServer
let e: ReturnType<typeof emailClient>
let s: Session
beforeAll(async () => {
  srv = await startTestServer({
    env: { SYSTEM_KEY, MAIL_A_WEBHOOK_SECRET: MAIL_A_SECRET, MAIL_B_WEBHOOK_SECRET: MAIL_B_SECRET },
  })
  e = emailClient(srv)
  s = await api(srv).signup()
})
afterAll(async () => srv?.stop())

/** Sends an outreach mail; its message id, provider id and address. */
async function sent(tag = "lead") {
  const to = uniqueEmail(tag)
  const r = await e.outreach(s.tenantId, { to, subject: "Hi", text: "Hello" })
  expect(r.status).toBe(201)
  return { id: r.body.message_id as number, pid: r.body.provider_message_id as string, to }
}

const suppressions = async (to: string) =>
  srv.sql<Json[]>`select tenant_id, reason from email_suppressions where email = ${to} order by tenant_id`

describe("mail_b", () => {
  it("delivered / opened / clicked update the message; one event or an array; the hyphenated header", async () => {
    const m = await sent()
    let res = await e.mailB({ event: "delivered", msgid: m.pid, to: m.to, ts: 1 })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ received: 1, processed: 1, duplicates: 0, unknown_messages: 0 })
    expect((await e.message(m.id))!.state).toBe("delivered")
    // The hyphenated header (the HTTP engine drops requests with "_" in a header name; nginx renames it).
    res = await e.mailB([
      { event: "open", msgid: m.pid, to: m.to, ts: 2 },
      { event: "click", msgid: m.pid, to: m.to, ts: 3 },
    ])
    expect(res.status).toBe(200)
    expect(((await res.json()) as Json).processed).toBe(2)
    const row = (await e.message(m.id))!
    expect(row.opened_at).not.toBeNull()
    expect(row.clicked_at).not.toBeNull()
    expect(await e.events(s.tenantId, m.to)).toEqual(["sent", "delivered", "opened", "clicked"])
  })

  it("a bad or missing signature is 401 and changes nothing", async () => {
    const m = await sent()
    const body = { event: "bounce", msgid: m.pid, to: m.to, status: "5.1.1", ts: 9 }
    expect((await e.mailB(body, "wrong-secret")).status).toBe(401)
    const raw = await fetch(`${srv.url}/email/webhooks/mail_b`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    })
    expect(raw.status).toBe(401)
    expect((await e.message(m.id))!.state).toBe("sent")
    expect(await suppressions(m.to)).toEqual([])
    expect((await srv.sql`select 1 from email_webhook_events where email = ${m.to}`).length).toBe(0)
  })

  it("a hard bounce suppresses the address everywhere at once; a replay is a duplicate", async () => {
    const m = await sent()
    const body = { event: "bounce", msgid: m.pid, to: m.to, status: "5.1.1", reason: "no such user", ts: 10 }
    expect(await (await e.mailB(body)).json()).toMatchObject({ processed: 1, duplicates: 0 })
    expect(await (await e.mailB(body)).json()).toMatchObject({ processed: 0, duplicates: 1 })
    expect((await e.message(m.id))!.state).toBe("bounced")
    expect(await suppressions(m.to)).toEqual([{ tenant_id: 0, reason: "hard_bounce" }])
    const again = await e.outreach(s.tenantId, { to: m.to, subject: "Hi", text: "x" })
    expect(again.status).toBe(409)
    expect(again.body).toMatchObject({ code: "RECIPIENT_SUPPRESSED", reason: "hard_bounce", scope: "global" })
    // Another workspace cannot mail it either.
    const other = await api(srv).signup()
    expect((await e.outreach(other.tenantId, { to: m.to, subject: "Hi", text: "x" })).status).toBe(409)
    expect(await e.events(s.tenantId, m.to)).toEqual(["sent", "bounced", "blocked"])
  })

  it("concurrent deliveries of one event apply it once; a reply lands on the message's history", async () => {
    const m = await sent()
    const body = { event: "delivered", msgid: m.pid, to: m.to, ts: 42 }
    const results = await Promise.all(
      Array.from({ length: 5 }, async () => ((await (await e.mailB(body)).json()) as Json).processed as number),
    )
    expect(results.reduce((a, b) => a + b, 0)).toBe(1)
    await e.mailB({ event: "reply", msgid: m.pid, to: m.to, ts: 43 })
    expect(await e.events(s.tenantId, m.to)).toEqual(["sent", "delivered", "replied"])
  })

  it("soft bounces suppress only at the threshold", async () => {
    const m = await sent()
    for (let i = 1; i < SOFT_BOUNCE_LIMIT; i++) {
      await e.mailB({ event: "bounce", msgid: m.pid, to: m.to, status: "4.2.2", reason: "mailbox full", ts: 100 + i })
      expect(await suppressions(m.to)).toEqual([])
    }
    expect((await e.outreach(s.tenantId, { to: m.to, subject: "Hi", text: "x" })).status).toBe(201)
    await e.mailB({ event: "soft_bounce", msgid: m.pid, to: m.to, ts: 200 })
    expect(await suppressions(m.to)).toEqual([{ tenant_id: 0, reason: "soft_bounce" }])
    expect((await e.message(m.id))!.state).toBe("sent")
    expect((await e.outreach(s.tenantId, { to: m.to, subject: "Hi", text: "x" })).status).toBe(409)
  })

  it("unknown message ids are acknowledged and recorded", async () => {
    const to = uniqueEmail("stranger")
    const res = await e.mailB([
      { event: "delivered", msgid: "not-ours-1", to, ts: 1 },
      { event: "spamreport", msgid: "not-ours-2", to, ts: 2 },
    ])
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ received: 2, processed: 2, unknown_messages: 2 })
    const rows = await srv.sql<Json[]>`select known from email_webhook_events where email = ${to}`
    expect(rows.map((r) => r.known)).toEqual([false, false])
    // A complaint names the address: it is suppressed even though the message is not ours.
    expect(await suppressions(to)).toEqual([{ tenant_id: 0, reason: "complaint" }])
  })

  it("refuses a malformed body or a batch over 1,000 (400) after the signature check", async () => {
    expect((await e.mailB({ nope: 1 })).status).toBe(400)
    const big = Array.from({ length: 1001 }, (_, i) => ({ event: "delivered", msgid: `x${i}`, ts: i }))
    expect((await e.mailB(big)).status).toBe(400)
    const full = Array.from({ length: 1000 }, (_, i) => ({ event: "open", msgid: `bulk-${i}`, ts: i }))
    expect(await (await e.mailB(full)).json()).toMatchObject({ received: 1000, processed: 1000 })
  })
})

describe("mail_a", () => {
  it("a complaint suppresses globally; an unsubscribe suppresses for the workspace only", async () => {
    const c = await sent("complainer")
    let res = await e.mailA({ event: "complaint", email: c.to, "message-id": c.pid, ts: 5 })
    expect(res.status).toBe(200)
    expect((await e.message(c.id))!.state).toBe("complained")
    expect(await suppressions(c.to)).toEqual([{ tenant_id: 0, reason: "complaint" }])

    const u = await sent("leaver")
    res = await e.mailA([{ event: "unsubscribe", email: u.to, "message-id": u.pid, ts: 6 }])
    expect(res.status).toBe(200)
    expect(await suppressions(u.to)).toEqual([{ tenant_id: s.tenantId, reason: "unsubscribe" }])
    const blocked = await e.outreach(s.tenantId, { to: u.to, subject: "Hi", text: "x" })
    expect(blocked.body).toMatchObject({ code: "RECIPIENT_SUPPRESSED", reason: "unsubscribe", scope: "workspace" })
    const other = await api(srv).signup()
    expect((await e.outreach(other.tenantId, { to: u.to, subject: "Hi", text: "x" })).status).toBe(201)
    expect(await e.events(s.tenantId, u.to)).toEqual(["sent", "unsubscribed", "blocked"])
  })

  it("a wrong or missing key is 401 and changes nothing; a replay is a duplicate", async () => {
    const m = await sent()
    const body = { event: "delivered", email: m.to, "message-id": m.pid, ts: 7 }
    expect((await e.mailA(body, "wrong")).status).toBe(401)
    expect((await e.mailA(body, null)).status).toBe(401)
    expect((await e.message(m.id))!.state).toBe("sent")
    expect(await (await e.mailA(body)).json()).toMatchObject({ processed: 1 })
    expect(await (await e.mailA(body)).json()).toMatchObject({ processed: 0, duplicates: 1 })
    expect((await e.message(m.id))!.state).toBe("delivered")
  })
})

describe("without configured secrets", () => {
  let bare: TestServer
  beforeAll(async () => {
    bare = await startTestServer({ env: { SYSTEM_KEY } })
  })
  afterAll(async () => bare?.stop())

  it("mail_a is accepted without a key; mail_b is refused", async () => {
    const b = emailClient(bare)
    expect(
      (await b.mailA({ event: "delivered", email: "x@example.com", "message-id": "m1", ts: 1 }, null)).status,
    ).toBe(200)
    expect((await b.mailB({ event: "delivered", msgid: "m1", ts: 1 })).status).toBe(401)
  })
})
