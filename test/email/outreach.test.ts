// Outreach email through the real server and the outbox simulator: the unsubscribe link and the
// RFC 8058 headers, the message row, one-click unsubscribe by GET page and by POST, preferences and
// resubscribe, tampered tokens, the 409 for suppressed addresses, transactional mail never blocked.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { api, type Session, SYSTEM_KEY, uniqueEmail } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { emailClient } from "./email.support.js"

let srv: TestServer
let e: ReturnType<typeof emailClient>
let s: Session
beforeAll(async () => {
  srv = await sharedTestServer({ env: { SYSTEM_KEY } })
  e = emailClient(srv)
  s = await api(srv).signup()
})
afterAll(async () => srv?.stop())

const send = (to: string, over: Record<string, unknown> = {}) =>
  e.outreach(s.tenantId, { to, subject: "Hello {{name}}", text: "Hi {{name}},\nwe called earlier.", ...over })

describe("POST /api/internal/outreach/email", () => {
  it("sends through the outbox with a visible unsubscribe link and the RFC 8058 headers", async () => {
    const to = uniqueEmail("lead")
    const r = await send(to.toUpperCase(), { data: { name: "Ada <b>" }, html: "<p>Hi {{name}}</p>" })
    expect(r.status).toBe(201)
    expect(r.body).toMatchObject({ state: "sent", to, channel: "outreach", provider: "outbox" })
    const mail = e.lastMail(to)!
    expect(mail.subject).toBe("Hello Ada <b>")
    // It goes out in the workspace's name.
    const [ws] = await srv.sql<[{ name: string }]>`select name from tenants where id = ${s.tenantId}`
    expect(mail.sender_name).toBe(ws.name)
    expect(mail.html).toContain("<p>Hi Ada &lt;b&gt;</p>")
    expect(mail.headers?.["List-Unsubscribe-Post"]).toBe("List-Unsubscribe=One-Click")
    const unsub = mail.links.find((l) => l.includes("/email/unsubscribe?t="))!
    expect(mail.headers?.["List-Unsubscribe"]).toBe(`<${unsub}>`)
    expect(mail.text).toContain(unsub)
    expect(r.body.unsubscribe_url).toBe(unsub)
    const row = await e.message(r.body.message_id)
    expect(row).toMatchObject({ state: "sent", provider_message_id: mail.id, to_email: to, tenant_id: s.tenantId })
    expect(await e.events(s.tenantId, to)).toEqual(["sent"])
  })

  it("validates the body (422) and needs the system key and a known workspace", async () => {
    expect((await e.outreach(s.tenantId, { to: "not-an-email", subject: "x", text: "y" })).status).toBe(422)
    expect((await e.outreach(s.tenantId, { to: uniqueEmail(), subject: "x" })).status).toBe(422)
    expect((await e.outreach(999_999, { to: uniqueEmail(), subject: "x", text: "y" })).status).toBe(404)
    const res = await fetch(`${srv.url}/api/internal/outreach/email`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-system-key": "wrong", "x-tenant-id": String(s.tenantId) },
      body: JSON.stringify({ to: uniqueEmail(), subject: "x", text: "y" }),
    })
    expect(res.status).toBe(401)
  })
})

describe("unsubscribe, preferences, resubscribe", () => {
  it("GET /email/unsubscribe unsubscribes in one click (idempotent); then 409", async () => {
    const to = uniqueEmail("gone")
    const r = await send(to)
    const token = e.tokenOf(r.body.unsubscribe_url)
    const p = await e.page("GET", `/email/unsubscribe?t=${token}`)
    expect(p.status).toBe(200)
    expect(p.headers.get("content-type")).toContain("text/html")
    expect(p.headers.get("content-security-policy")).toContain("default-src 'none'")
    expect(p.text).toContain("You are unsubscribed")
    expect(p.text).toContain(to)
    expect((await e.page("GET", `/email/unsubscribe?t=${token}`)).status).toBe(200)
    const again = await send(to)
    expect(again.status).toBe(409)
    expect(again.body).toMatchObject({ code: "RECIPIENT_SUPPRESSED", reason: "unsubscribed", scope: "channel" })
    expect(await e.events(s.tenantId, to)).toEqual(["sent", "unsubscribed", "blocked"])
    // Another channel to the same address still goes.
    expect((await send(to, { channel: "newsletter" })).status).toBe(201)
  })

  it("POST /email/unsubscribe answers the RFC 8058 one-click form", async () => {
    const to = uniqueEmail("oneclick")
    const r = await send(to)
    const p = await e.page("POST", `/email/unsubscribe?t=${e.tokenOf(r.body.unsubscribe_url)}`, {
      "List-Unsubscribe": "One-Click",
    })
    expect(p.status).toBe(200)
    expect((await send(to)).status).toBe(409)
  })

  it("preferences list every channel with its state; toggles and resubscribe restore sending", async () => {
    const to = uniqueEmail("prefs")
    const r = await send(to)
    await send(to, { channel: "product_news" })
    const token = e.tokenOf(r.body.unsubscribe_url)
    let p = await e.page("GET", `/email/preferences?t=${token}`)
    expect(p.status).toBe(200)
    expect(p.text).toMatch(/outreach<\/strong>: subscribed/)
    expect(p.text).toMatch(/product news<\/strong>: subscribed/)
    await e.page("POST", "/email/unsubscribe", { t: token })
    p = await e.page("GET", `/email/preferences?t=${token}`)
    expect(p.text).toMatch(/outreach<\/strong>: unsubscribed/)
    expect(p.text).toMatch(/product news<\/strong>: subscribed/)
    // The toggle form of the other channel carries that channel's token.
    const forms = [...p.text.matchAll(/name="t" value="([^"]+)"/g)].map((m) => m[1]!)
    expect(forms).toHaveLength(2)
    p = await e.page("POST", "/email/preferences", { t: forms[1]!, action: "unsubscribe" })
    expect(p.status).toBe(200)
    expect(p.text).toMatch(/product news<\/strong>: unsubscribed/)
    expect((await send(to, { channel: "product_news" })).status).toBe(409)
    // Resubscribe by GET link: outreach sends again, the other channel stays off.
    const back = await e.page("GET", `/email/resubscribe?t=${token}`)
    expect(back.status).toBe(200)
    expect(back.text).toContain("subscribed again")
    expect((await send(to)).status).toBe(201)
    expect((await send(to, { channel: "product_news" })).status).toBe(409)
  })

  it("a tampered, unknown or missing token is a 400/404 HTML page and changes nothing", async () => {
    const to = uniqueEmail("tamper")
    const r = await send(to)
    const token = e.tokenOf(r.body.unsubscribe_url)
    const [v, kid, payload, sig] = token.split(".") as [string, string, string, string]
    const other = Buffer.from(JSON.stringify({ t: s.tenantId, e: "victim@example.com", c: "outreach" })).toString(
      "base64url",
    )
    const flipped = sig[0] === "A" ? `B${sig.slice(1)}` : `A${sig.slice(1)}`
    for (const bad of [
      `${v}.${kid}.${other}.${sig}`,
      `${v}.${kid}.${payload}.${flipped}`,
      `${v}.k9.${payload}.${sig}`,
    ]) {
      for (const path of ["/email/unsubscribe", "/email/preferences", "/email/resubscribe"]) {
        const p = await e.page("GET", `${path}?t=${bad}`)
        expect(p.status).toBe(404)
        expect(p.headers.get("content-type")).toContain("text/html")
      }
      expect((await e.page("POST", `/email/unsubscribe?t=${bad}`)).status).toBe(404)
    }
    for (const bad of ["", "nonsense", "<script>alert(1)</script>", `${token}.x`]) {
      const p = await e.page("GET", `/email/unsubscribe?t=${encodeURIComponent(bad)}`)
      expect(p.status).toBe(400)
      expect(p.text).not.toContain("<script>")
    }
    expect((await e.page("GET", "/email/unsubscribe")).status).toBe(400)
    expect((await send(to)).status).toBe(201)
  })
})

describe("suppression and transactional mail", () => {
  it("a globally suppressed address is refused for outreach but still gets transactional mail", async () => {
    const to = uniqueEmail("bounced")
    await srv.sql`
      insert into email_suppressions (tenant_id, email, reason, source) values (0, ${to}, 'hard_bounce', 't')`
    const r = await send(to)
    expect(r.status).toBe(409)
    expect(r.body).toMatchObject({ code: "RECIPIENT_SUPPRESSED", reason: "hard_bounce", scope: "global" })
    expect(await e.events(s.tenantId, to)).toEqual(["blocked"])
    const t = await send(to, { channel: "transactional", subject: "Your receipt" })
    expect(t.status).toBe(201)
    expect(t.body.unsubscribe_url).toBeUndefined()
    expect(e.lastMail(to)!.headers).toBeUndefined()
    // Sign-up verification (a transactional mail of the auth service) reaches the address too.
    const session = await api(srv).signup({ email: to })
    expect(readOutbox(srv.config.outboxFile).some((m) => m.to === to && m.kind === "verify_email")).toBe(true)
    expect(session.tenantId).toBeGreaterThan(0)
  })

  it("an unsubscribed address still gets its sign-in code", async () => {
    const to = uniqueEmail("otp")
    const u = await api(srv).signup({ email: to })
    const r = await e.outreach(u.tenantId, { to, subject: "Offer", text: "hi" })
    await e.page("GET", `/email/unsubscribe?t=${e.tokenOf(r.body.unsubscribe_url)}`)
    expect((await e.outreach(u.tenantId, { to, subject: "Offer", text: "hi" })).status).toBe(409)
    const before = e.lastMail(to)!.id
    const res = await fetch(`${srv.url}/auth/otp/start`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: to }),
    })
    expect(res.status).toBeLessThan(300)
    const last = e.lastMail(to)!
    expect(last.id).not.toBe(before)
    expect(last.kind).toBe("otp")
  })
})

describe("timeline", () => {
  it("shows message.sent, .delivered, .unsubscribed and the refused send, newest first", async () => {
    const to = uniqueEmail("timeline")
    const r = await send(to)
    await srv.sql`
      insert into email_events (tenant_id, to_email, message_id, kind, channel)
      values (${s.tenantId}, ${to}, ${r.body.message_id}, 'delivered', 'outreach')`
    await e.page("GET", `/email/unsubscribe?t=${e.tokenOf(r.body.unsubscribe_url)}`)
    expect((await send(to)).status).toBe(409)
    const res = await fetch(`${srv.url}/api/timeline?email=${encodeURIComponent(to)}`, {
      headers: { authorization: `Bearer ${s.token}` },
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { events: Array<{ kind: string; payload: Record<string, unknown> }> }
    expect(body.events.map((x) => x.payload.event)).toEqual([
      "message.blocked",
      "message.unsubscribed",
      "message.delivered",
      "message.sent",
    ])
    expect(body.events.every((x) => x.kind === "email")).toBe(true)
    expect(body.events[3]!.payload).toMatchObject({ message_id: r.body.message_id, to, channel: "outreach" })
    // Another workspace sees none of it.
    const other = await api(srv).signup()
    const theirs = await fetch(`${srv.url}/api/timeline?email=${encodeURIComponent(to)}`, {
      headers: { authorization: `Bearer ${other.token}` },
    })
    expect(((await theirs.json()) as { count: number }).count).toBe(0)
  })
})
