// The storefront connection through the real server, with the simulator (the demo shop) and with
// the HTTP adapter against a local fake shop: install validation, JSON vs redirect, the callback's
// state (forged, replayed, expired, other shop, other workspace) and hmac checks, the encrypted
// token, status, disconnect and reconnect, and the storefront source fetched to ready.
import { createHmac, randomBytes } from "node:crypto"
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SIM_SIGNING_SECRET } from "../../src/providers/storefront/sim.storefront.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { type FakeShop, startFakeShop } from "./storefront.support.js"

const MASTER_KEY = Buffer.alloc(32, 7).toString("base64")
const APP = { key: "app-client-id", secret: "app-secret-for-hmac" }
const JSON_ACCEPT = { accept: "application/json" }

let sim: TestServer
let http: TestServer
let shop: FakeShop
beforeAll(async () => {
  shop = await startFakeShop()
  ;[sim, http] = await Promise.all([
    startTestServer({ env: { CREDENTIALS_MASTER_KEY: MASTER_KEY } }),
    startTestServer({
      env: {
        CREDENTIALS_MASTER_KEY: MASTER_KEY,
        STOREFRONT_API_KEY: APP.key,
        STOREFRONT_API_SECRET: APP.secret,
        STOREFRONT_BASE_URL_OVERRIDE: shop.url,
        ALLOW_PRIVATE_PROVIDER_URLS: "true",
      },
    }),
  ])
})
afterAll(async () => {
  await Promise.all([sim?.stop(), http?.stop()])
  await shop?.close()
})

const sign = (q: URLSearchParams, secret: string) => {
  const msg = [...q.entries()]
    .filter(([k]) => k !== "hmac")
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join("&")
  return createHmac("sha256", secret).update(msg).digest("hex")
}

const client = (srv: TestServer) => {
  const a = api(srv)
  const install = (s: Session, shopName: string, headers: Record<string, string> = JSON_ACCEPT) =>
    a.call("GET", `/storefront/install?shop=${encodeURIComponent(shopName)}`, { token: s.token, headers })
  const stateOf = async (s: Session, shopName: string) => {
    const res = await install(s, shopName)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { authorize_url: string }
    return { url: new URL(body.authorize_url), state: new URL(body.authorize_url).searchParams.get("state")! }
  }
  const callback = (q: URLSearchParams | string, headers: Record<string, string> = JSON_ACCEPT) =>
    fetch(`${srv.url}/storefront/callback?${q.toString()}`, { headers })
  const status = async (s: Session) =>
    (await (await a.call("GET", "/storefront/status", { token: s.token })).json()) as Record<string, unknown>
  const source = (tenantId: number) =>
    srv.sql<Array<{ id: number; status: string; row_count: number; error: string | null }>>`
      select id, status, row_count, error from data_sources where tenant_id = ${tenantId} and kind = 'storefront'`
  const readySource = async (tenantId: number, want = "ready") => {
    const until = Date.now() + 20_000
    for (;;) {
      const [row] = await source(tenantId)
      if (row !== undefined && row.status === want) return row
      if (Date.now() > until) throw new Error(`storefront source not ${want}: ${JSON.stringify(row)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return { a, install, stateOf, callback, status, source, readySource }
}

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string }),
})

describe("storefront with the simulator (the demo shop)", () => {
  let c: ReturnType<typeof client>
  beforeAll(() => {
    c = client(sim)
  })

  it("refuses a shop that is not <name>.myshopify.com (422)", async () => {
    const s = await c.a.signup()
    for (const bad of [
      "",
      "evil.com",
      "-shop.myshopify.com",
      "a.b.myshopify.com",
      "shop.myshopify.com.evil.com",
      "sh op.myshopify.com",
    ]) {
      const e = await errorOf(await c.install(s, bad))
      expect(e, bad).toMatchObject({ status: 422, code: "VALIDATION_FAILED" })
    }
    expect((await errorOf(await c.a.call("GET", "/storefront/install", { token: s.token }))).status).toBe(422)
    // A name is lower-cased.
    const ok = (await (await c.install(s, "Demo-Shop.myshopify.com")).json()) as { shop: string }
    expect(ok.shop).toBe("demo-shop.myshopify.com")
  })

  it("needs a signed-in caller with write scope", async () => {
    expect((await fetch(`${sim.url}/storefront/install?shop=x.myshopify.com`)).status).toBe(401)
    const s = await c.a.signup()
    const key = await c.a.createKey(s, { name: "reader", scope: "read" })
    const asKey = (path: string, method = "GET") => c.a.call(method, path, { token: key.secret, headers: JSON_ACCEPT })
    expect((await asKey("/storefront/install?shop=x.myshopify.com")).status).toBe(403)
    expect((await asKey("/storefront/status")).status).toBe(200)
    expect((await asKey("/storefront", "DELETE")).status).toBe(403)
  })

  it("answers JSON for Accept: application/json and a 302 for a browser", async () => {
    const s = await c.a.signup()
    const { url, state } = await c.stateOf(s, "demo.myshopify.com")
    // The simulator approves at once: its authorize URL is our callback, with a demo code, signed.
    expect(url.pathname).toBe("/storefront/callback")
    expect(url.searchParams.get("shop")).toBe("demo.myshopify.com")
    expect(url.searchParams.get("code")).toMatch(/^demo-/)
    expect(Buffer.from(state, "base64url").length).toBeGreaterThanOrEqual(16)
    const stored = await sim.sql<Array<{ state_sha256: Buffer; shop: string; secs: number }>>`
      select state_sha256, shop, extract(epoch from expires_at - now())::int as secs
      from storefront_states where tenant_id = ${s.tenantId}`
    expect(stored).toHaveLength(1)
    expect(Buffer.from(stored[0]!.state_sha256).toString("base64url")).not.toBe(state)
    expect(stored[0]!.secs).toBeGreaterThan(590)
    expect(stored[0]!.secs).toBeLessThanOrEqual(600)

    const res = await fetch(`${sim.url}/storefront/install?shop=demo.myshopify.com`, {
      headers: { authorization: `Bearer ${s.token}`, accept: "text/html,*/*;q=0.8" },
      redirect: "manual",
    })
    expect(res.status).toBe(302)
    expect(new URL(res.headers.get("location")!).pathname).toBe("/storefront/callback")
  })

  it("connects the demo shop: token encrypted, status, and the source fetched to 200 customers", async () => {
    const s = await c.a.signup()
    expect(await c.status(s)).toEqual({ connected: false })
    const { url } = await c.stateOf(s, "demo.myshopify.com")
    const res = await c.callback(url.searchParams)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { connected: boolean; shop: string; source_id: number }
    expect(body).toMatchObject({ connected: true, shop: "demo.myshopify.com" })
    const st = await c.status(s)
    expect(st).toMatchObject({ connected: true, shop: "demo.myshopify.com", scopes: ["read_customers", "read_orders"] })
    expect(Date.parse(String(st.connected_at))).toBeGreaterThan(Date.now() - 60_000)
    const [conn] = await sim.sql<Array<{ access_token_enc: string }>>`
      select access_token_enc from storefront_connections where tenant_id = ${s.tenantId}`
    expect(conn!.access_token_enc).toMatch(/^v1:/)
    expect(conn!.access_token_enc).not.toContain("simtok_")

    const src = await c.readySource(s.tenantId)
    expect(src).toMatchObject({ id: body.source_id, row_count: 200 })
    const rows = await sim.sql<Array<{ data: Record<string, unknown> }>>`
      select data from data_source_rows where source_id = ${src.id} order by row_no`
    expect(rows).toHaveLength(200)
    expect(Object.keys(rows[0]!.data)).toEqual(
      expect.arrayContaining(["name", "email", "phone", "city", "orders_count", "total_spent", "currency"]),
    )
    const phones = rows.map((r) => r.data.phone as string | null)
    const valid = phones.filter((p) => p !== null && parsePhoneNumberFromString(p)?.isValid() === true)
    expect(valid).toHaveLength(187)
    expect(phones.filter((p) => p === null)).toHaveLength(5)
  })

  it("shows a page to a browser that lands on the callback", async () => {
    const s = await c.a.signup()
    const { url } = await c.stateOf(s, "browser.myshopify.com")
    const res = await c.callback(url.searchParams, { accept: "text/html" })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/text\/html/)
    expect(await res.text()).toContain("browser.myshopify.com is connected")
  })

  it("refuses a replayed state (403), and a forged one", async () => {
    const s = await c.a.signup()
    const { url } = await c.stateOf(s, "demo.myshopify.com")
    expect((await c.callback(url.searchParams)).status).toBe(200)
    expect(await errorOf(await c.callback(url.searchParams))).toMatchObject({ status: 403, code: "FORBIDDEN" })

    const forged = new URLSearchParams(url.searchParams)
    forged.set("state", randomBytes(32).toString("base64url"))
    forged.set("hmac", sign(forged, SIM_SIGNING_SECRET))
    expect(await errorOf(await c.callback(forged))).toMatchObject({ status: 403, code: "FORBIDDEN" })
    forged.delete("hmac")
    expect((await c.callback(forged)).status).toBe(403)
  })

  it("refuses a bad hmac (401) without using up the state", async () => {
    const s = await c.a.signup()
    const { url } = await c.stateOf(s, "demo.myshopify.com")
    const tampered = new URLSearchParams(url.searchParams)
    tampered.set("hmac", "0".repeat(64))
    expect(await errorOf(await c.callback(tampered))).toMatchObject({ status: 401, code: "INVALID_SIGNATURE" })
    tampered.set("hmac", "not-hex")
    expect((await c.callback(tampered)).status).toBe(401)
    // A parameter changed after signing.
    const moved = new URLSearchParams(url.searchParams)
    moved.set("timestamp", "1")
    expect((await c.callback(moved)).status).toBe(401)
    expect(await c.status(s)).toEqual({ connected: false })
    expect((await c.callback(url.searchParams)).status).toBe(200)
  })

  it("refuses a state for another shop, and an expired one", async () => {
    const s = await c.a.signup()
    const { url } = await c.stateOf(s, "one.myshopify.com")
    const other = new URLSearchParams(url.searchParams)
    other.set("shop", "two.myshopify.com")
    other.set("hmac", sign(other, SIM_SIGNING_SECRET))
    expect((await c.callback(other)).status).toBe(403)

    await sim.sql`update storefront_states set expires_at = now() - interval '1 second' where tenant_id = ${s.tenantId}`
    expect((await c.callback(url.searchParams)).status).toBe(403)
    expect(await c.status(s)).toEqual({ connected: false })
  })

  it("needs shop, code and state on the callback (422)", async () => {
    for (const q of [
      "code=x&state=y",
      "shop=a.myshopify.com&state=y",
      "shop=a.myshopify.com&code=x",
      "shop=a.myshopify.com&code=&state=y",
    ]) {
      const e = await errorOf(await c.callback(q))
      expect(e, q).toMatchObject({ status: 422, code: "VALIDATION_FAILED" })
    }
    expect((await c.callback("shop=evil.com&code=x&state=y")).status).toBe(422)
  })

  it("binds the state to its workspace: another workspace's state connects only that workspace", async () => {
    const owner = await c.a.signup()
    const other = await c.a.signup()
    const mine = await c.stateOf(owner, "iso.myshopify.com")
    await c.stateOf(other, "iso.myshopify.com")
    expect((await c.callback(mine.url.searchParams)).status).toBe(200)
    expect(await c.status(owner)).toMatchObject({ connected: true })
    expect(await c.status(other)).toEqual({ connected: false })
    expect(await c.source(other.tenantId)).toHaveLength(0)
    expect(await c.source(owner.tenantId)).toHaveLength(1)
  })

  it("disconnects (admin), keeps the source and its rows, and reuses the source on reconnect", async () => {
    const s = await c.a.signup()
    const first = await c.stateOf(s, "demo.myshopify.com")
    const { source_id } = (await (await c.callback(first.url.searchParams)).json()) as { source_id: number }
    await c.readySource(s.tenantId)
    const del = await c.a.call("DELETE", "/storefront", { token: s.token })
    expect(del.status).toBe(200)
    expect(await del.json()).toEqual({ connected: false, disconnected: true })
    expect(await c.status(s)).toEqual({ connected: false })
    expect(await c.source(s.tenantId)).toMatchObject([{ id: source_id, row_count: 200 }])
    // Again: nothing to forget.
    expect(await (await c.a.call("DELETE", "/storefront", { token: s.token })).json()).toEqual({
      connected: false,
      disconnected: false,
    })

    const again = await c.stateOf(s, "demo.myshopify.com")
    const body = (await (await c.callback(again.url.searchParams)).json()) as { source_id: number }
    expect(body.source_id).toBe(source_id)
    expect(await c.source(s.tenantId)).toHaveLength(1)
    await c.readySource(s.tenantId)
  })

  it("answers 503 ENCRYPTION_UNAVAILABLE without a master key", async () => {
    const bare = await startTestServer()
    try {
      const b = client(bare)
      const s = await b.a.signup()
      expect(await errorOf(await b.install(s, "demo.myshopify.com"))).toMatchObject({
        status: 503,
        code: "ENCRYPTION_UNAVAILABLE",
      })
    } finally {
      await bare.stop()
    }
  })
})

describe("storefront over HTTP, against a local fake shop", () => {
  let c: ReturnType<typeof client>
  beforeAll(() => {
    c = client(http)
  })

  const signedCallback = (shopName: string, state: string, code: string, secret = APP.secret) => {
    const q = new URLSearchParams({ code, shop: shopName, state, timestamp: String(Math.floor(Date.now() / 1000)) })
    q.set("hmac", sign(q, secret))
    return q
  }

  it("hands out the platform's authorize URL with the app's client id, scopes, callback and state", async () => {
    const s = await c.a.signup()
    const { url, state } = await c.stateOf(s, "acme.myshopify.com")
    expect(url.origin).toBe("https://acme.myshopify.com")
    expect(url.pathname).toBe("/admin/oauth/authorize")
    expect(url.searchParams.get("client_id")).toBe(APP.key)
    expect(url.searchParams.get("scope")).toBe("read_customers,read_orders")
    expect(url.searchParams.get("redirect_uri")).toBe(`${http.url}/storefront/callback`)
    expect(state.length).toBeGreaterThanOrEqual(22)
  })

  it("connects with a good hmac and code, and fetches the shop's customers over its pages", async () => {
    shop.customers = Array.from({ length: 7 }, (_, i) => ({
      id: 100 + i,
      first_name: `First${i}`,
      last_name: "Buyer",
      email: `b${i}@shop.example`,
      phone: i === 3 ? null : `+1415234${String(1000 + i)}`,
      orders_count: i,
      total_spent: `${i * 10}.50`,
      currency: "USD",
      default_address: { city: "Oakland", country_code: "US", phone: i === 3 ? "+14152349999" : null },
    }))
    const s = await c.a.signup()
    const { state } = await c.stateOf(s, "acme.myshopify.com")
    shop.codes.set("good-code", "shpat_secret_token")
    const res = await c.callback(signedCallback("acme.myshopify.com", state, "good-code"))
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ connected: true, shop: "acme.myshopify.com" })
    expect(shop.exchanges.at(-1)).toEqual({ client_id: APP.key, client_secret: APP.secret, code: "good-code" })
    expect(await c.status(s)).toMatchObject({ connected: true, scopes: ["read_customers", "read_orders"] })

    const src = await c.readySource(s.tenantId)
    expect(src.row_count).toBe(7)
    expect(shop.reads.filter((r) => r.token === "shpat_secret_token").length).toBeGreaterThanOrEqual(3)
    const rows = await http.sql<Array<{ data: Record<string, unknown> }>>`
      select data from data_source_rows where source_id = ${src.id} order by row_no`
    expect(rows[3]!.data).toMatchObject({
      customer_id: 103,
      name: "First3 Buyer",
      phone: "+14152349999",
      total_spent: 30.5,
    })
    expect(rows[0]!.data).toMatchObject({ city: "Oakland", country: "US", currency: "USD", orders_count: 0 })
  })

  it("refuses a bad hmac before asking the shop anything", async () => {
    const s = await c.a.signup()
    const { state } = await c.stateOf(s, "acme.myshopify.com")
    const before = shop.exchanges.length
    const res = await c.callback(signedCallback("acme.myshopify.com", state, "whatever", "wrong-secret"))
    expect(await errorOf(res)).toMatchObject({ status: 401, code: "INVALID_SIGNATURE" })
    expect(shop.exchanges.length).toBe(before)
  })

  it("answers 409 CREDENTIAL_REJECTED when the shop refuses the code, and the state stays used", async () => {
    const s = await c.a.signup()
    const { state } = await c.stateOf(s, "acme.myshopify.com")
    const q = signedCallback("acme.myshopify.com", state, "unknown-code")
    expect(await errorOf(await c.callback(q))).toMatchObject({ status: 409, code: "CREDENTIAL_REJECTED" })
    expect((await c.callback(q)).status).toBe(403)
    expect(await c.status(s)).toEqual({ connected: false })
  })

  it("marks the source failed with the reason when the token stops working", async () => {
    const s = await c.a.signup()
    const { state } = await c.stateOf(s, "acme.myshopify.com")
    shop.codes.set("code-2", "token-2")
    expect((await c.callback(signedCallback("acme.myshopify.com", state, "code-2"))).status).toBe(200)
    const src = await c.readySource(s.tenantId)
    await http.sql`
      update storefront_connections set access_token_enc = (
        select access_token_enc from storefront_connections where tenant_id <> ${s.tenantId} limit 1)
      where tenant_id = ${s.tenantId}`
    const res = await c.a.call("POST", `/data/sources/${src.id}/fetch`, { token: s.token })
    expect(res.status).toBe(202)
    const failed = await c.readySource(s.tenantId, "failed")
    expect(failed.error).toMatch(/credential|authentic/i)
    expect(failed.row_count).toBe(7)
  })
})
