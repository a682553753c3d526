// Signup attribution: utm/referrer/landing captured from the signup body and the first-touch
// cookie, and GET /api/internal/attribution/signups counting signups, verified owners and paying
// workspaces per source/medium/campaign over a window, moved with a fixed clock.
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Clock } from "../../src/platform/Clock.js"
import { signupReport } from "../../src/usage-events/attribution.service.js"
import { api, uniqueEmail } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const SYSTEM_KEY = "system-key-for-attribution-tests"
type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
const ids: Record<string, { tenantId: number; email: string }> = {}

async function signup(name: string, extra: Json = {}, cookie?: string) {
  const email = uniqueEmail(name)
  const res = await a.call("POST", "/auth/signup", {
    body: { email, password: "correct horse battery staple", ...extra },
    ...(cookie !== undefined && { headers: { cookie } }),
  })
  expect(res.status, await res.clone().text()).toBe(201)
  const body = (await res.json()) as Json
  ids[name] = { tenantId: body.tenant.id, email }
  return ids[name]!
}

const report = async (query = "", key: string | null = SYSTEM_KEY) => {
  const res = await fetch(`${srv.url}/api/internal/attribution/signups${query}`, {
    headers: key === null ? {} : { "x-system-key": key },
  })
  return { status: res.status, body: (await res.json()) as Json }
}

beforeAll(async () => {
  srv = await startTestServer({ env: { SYSTEM_KEY, PAYMENT_WEBHOOK_SECRET: "generic-webhook-secret" } })
  a = api(srv)
  const google = { utm_source: "google", utm_medium: "cpc", utm_campaign: "spring" }
  // Paid search, verified, paying through a succeeded top-up.
  const g1 = await signup("g1", { ...google, landing_path: "/pricing", referrer: "https://www.google.com/" })
  await a.verifyEmail(g1.email)
  const s = await a.login(g1.email, "correct horse battery staple")
  const intent = (await (
    await a.call("POST", "/billing/topup", { token: s.token, body: { amount_minor: 2500 } })
  ).json()) as Json
  const paid = await a.call("POST", "/billing/webhooks/stub", {
    body: { external_id: intent.external_id, status: "succeeded" },
  })
  expect(paid.status).toBe(200)
  // Paid search again, unverified; and one whose top-up is still pending (not paying).
  await signup("g2", google)
  const g3 = await signup("g3", google)
  await a.verifyEmail(g3.email)
  const s3 = await a.login(g3.email, "correct horse battery staple")
  await a.call("POST", "/billing/topup", { token: s3.token, body: { amount_minor: 2500 } })
  // Direct: no utm, no cookie; verified.
  const d = await signup("direct")
  await a.verifyEmail(d.email)
  // The body says newsletter, the first-touch cookie (querystring) says twitter/social: first touch
  // wins. Paying through an active subscription.
  const ft = encodeURIComponent("utm_source=twitter&utm_medium=social&landing_path=%2Fblog%2Fhello")
  const tw = await signup("tw", { utm_source: "newsletter" }, `other=1; parley_ft=${ft}`)
  await srv.sql`
    insert into subscriptions (tenant_id, status, amount_minor, currency, external_id, short_url,
      current_period_start, current_period_end)
    values (${tw.tenantId}, 'active', 100, 'USD', ${`sub_${randomBytes(6).toString("hex")}`}, 'http://x/',
      now() - interval '1 day', now() + interval '29 days')`
  // The cookie as JSON.
  const json = encodeURIComponent(JSON.stringify({ utm_source: "twitter", utm_medium: "social", junk: 1 }))
  await signup("tw2", {}, `parley_ft=${json}`)
  // Only a referrer: its host is the source, medium referral.
  await signup("hn", { referrer: "https://news.ycombinator.com/item?id=1" })
  // A malformed cookie is ignored, not a failed signup.
  await signup("bad-cookie", {}, "parley_ft=%7Bnot-json")
})
afterAll(async () => srv?.stop())

const row = (body: Json, source: string, medium: string, campaign: string) =>
  (body.by_source as Json[]).find((r) => r.source === source && r.medium === medium && r.campaign === campaign)

describe("signup capture", () => {
  it("stores the body's values, the first touch, and the channel counted", async () => {
    const [g1] = await srv.sql<Json[]>`
      select utm_source, utm_medium, utm_campaign, referrer, landing_path, first_touch, source, medium, campaign
      from signup_attributions where tenant_id = ${ids.g1!.tenantId}`
    expect(g1).toEqual({
      utm_source: "google",
      utm_medium: "cpc",
      utm_campaign: "spring",
      referrer: "https://www.google.com/",
      landing_path: "/pricing",
      first_touch: null,
      source: "google",
      medium: "cpc",
      campaign: "spring",
    })
    const [tw] = await srv.sql<Json[]>`
      select utm_source, first_touch, source, medium, campaign from signup_attributions
      where tenant_id = ${ids.tw!.tenantId}`
    expect(tw).toEqual({
      utm_source: "newsletter",
      first_touch: { utm_source: "twitter", utm_medium: "social", landing_path: "/blog/hello" },
      source: "twitter",
      medium: "social",
      campaign: "(none)",
    })
    const [bad] = await srv.sql<Json[]>`
      select first_touch, source from signup_attributions where tenant_id = ${ids["bad-cookie"]!.tenantId}`
    expect(bad).toEqual({ first_touch: null, source: "(direct)" })
  })

  it("refuses over-long or malformed attribution fields with 422", async () => {
    for (const bad of [
      { utm_source: "x".repeat(201) },
      { landing_path: "pricing" },
      { referrer: "y".repeat(2049) },
      { utm_campaign: "a\u0000b" },
    ]) {
      const res = await a.call("POST", "/auth/signup", {
        body: { email: uniqueEmail("bad"), password: "correct horse battery staple", ...bad },
      })
      expect(res.status, Object.keys(bad)[0]).toBe(422)
    }
  })
})

describe("GET /api/internal/attribution/signups", () => {
  it("counts signups, verified and paying per source/medium/campaign (default 90 days)", async () => {
    const r = await report()
    expect(r.status).toBe(200)
    expect(r.body.window_days).toBe(90)
    expect(r.body.total).toBe(8)
    expect(row(r.body, "google", "cpc", "spring")).toEqual({
      source: "google",
      medium: "cpc",
      campaign: "spring",
      signups: 3,
      verified: 2,
      paying: 1,
    })
    expect(row(r.body, "twitter", "social", "(none)")).toMatchObject({ signups: 2, verified: 0, paying: 1 })
    expect(row(r.body, "(direct)", "(none)", "(none)")).toMatchObject({ signups: 2, verified: 1, paying: 0 })
    expect(row(r.body, "news.ycombinator.com", "referral", "(none)")).toMatchObject({ signups: 1 })
    expect(r.body.by_source[0]).toMatchObject({ source: "google", signups: 3 })
    expect((r.body.by_source as Json[]).reduce((n, x) => n + x.signups, 0)).toBe(8)
  })

  it("counts over a window that a fixed clock moves", async () => {
    const at = (ms: number, days: number) =>
      srv.running.runtime.runPromise(signupReport(days).pipe(Effect.provide(Clock.fixed(new Date(ms)).layer)))
    const day = 86_400_000
    expect((await at(Date.now() + 10 * day, 11)).total).toBe(8)
    expect((await at(Date.now() + 10 * day, 9)).total).toBe(0)
    expect((await at(Date.now() + 89 * day, 90)).total).toBe(8)
    expect((await at(Date.now() + 91 * day, 90)).total).toBe(0)
    // Signups after the clock's now are outside the window too.
    expect((await at(Date.now() - day, 90)).total).toBe(0)
    // One signup 100 days old: out of the default window, in a 101-day one.
    await srv.sql`update signup_attributions set created_at = now() - interval '100 days'
      where tenant_id = ${ids.hn!.tenantId}`
    expect((await report()).body.total).toBe(7)
    expect(row((await report()).body, "news.ycombinator.com", "referral", "(none)")).toBeUndefined()
    const wide = await report("?days=101")
    expect(wide.body).toMatchObject({ window_days: 101, total: 8 })
  })

  it("validates days (1–3650) and requires the system key", async () => {
    expect((await report("?days=0")).status).toBe(422)
    expect((await report("?days=3651")).status).toBe(422)
    expect((await report("?days=abc")).status).toBe(422)
    expect((await report("?days=3650")).status).toBe(200)
    expect((await report("", null)).status).toBe(401)
    expect((await report("", "wrong")).status).toBe(401)
  })
})
