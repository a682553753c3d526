// The README's "Deploying" section as CI runs it: deploy/nginx.conf (ports, upstreams and the
// certificate substituted) terminating TLS in front of two api processes, with one runtime process,
// on real PostgreSQL and NATS, and a smoke through nginx only: signup, login, workflow, audience,
// run, a turn stream followed to the end, a held call's media stream let in (WebSocket upgrade),
// an approval decided, gw_card, gw_upi and mail_b events
// under the spec's underscore headers, and a telco_a callback signed for the public https:// URL.
// The engine refuses HTTP/1.0 (505): the same file without `proxy_http_version 1.1` fails.
import { createHmac, randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { request as httpsRequest } from "node:https"
import { Socket } from "node:net"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { mintStreamToken } from "../../src/calls/media-stream-tokens.repo.js"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { signGwCard } from "../../src/providers/payments/signatures.js"
import { signTelcoA } from "../../src/providers/telephony/telco-a.signature.js"
import { type SpawnedServer, spawnServer } from "../support/harness.js"
import { type Json, NGINX_CONF, nginxBinary, readEvents, startNginx, tlsClient } from "../support/nginx.js"
import { real, sharedDatabase, until } from "../support/processes.js"

const GW_CARD_SECRET = `whsec_${randomBytes(12).toString("hex")}`
const GW_UPI_SECRET = randomBytes(16).toString("hex")
const MAIL_B_SECRET = randomBytes(16).toString("hex")
const hmacHex = (secret: string, raw: string) => createHmac("sha256", secret).update(raw).digest("hex")

const portOf = (p: SpawnedServer) => new URL(p.url!).port

/** Sends a raw request line and headers; what came back within `ms` ("" for nothing). */
const rawExchange = (port: number, request: string, ms: number) =>
  new Promise<string>((resolve) => {
    let got = ""
    const s = new Socket()
    const done = () => {
      s.destroy()
      resolve(got)
    }
    const timer = setTimeout(done, ms)
    s.on("data", (d) => {
      got += d.toString("latin1")
      if (got.includes("\r\n\r\n")) {
        clearTimeout(timer)
        done()
      }
    })
    s.on("error", () => {
      clearTimeout(timer)
      done()
    })
    s.connect(port, "127.0.0.1", () => s.write(request))
  })

/**
 * A WebSocket upgrade over TLS: the status (101 when let in) and a refusal's body. Let in, it sends
 * one binary frame, which the stream protocol does not allow, and returns the close code the server
 * answers with through the same connection (frames pass both ways).
 */
const tlsUpgrade = (base: string, path: string, ca: string) =>
  new Promise<{ status: number; body: Json; closeCode?: number }>((resolve, reject) => {
    const req = httpsRequest(base + path, {
      ca,
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
        "Sec-WebSocket-Version": "13",
      },
    })
    req.on("upgrade", (res, socket, head) => {
      let got = Buffer.from(head)
      const timer = setTimeout(() => {
        socket.destroy()
        resolve({ status: res.statusCode ?? 0, body: {} })
      }, 5_000)
      socket.on("data", (d: Buffer) => {
        got = Buffer.concat([got, d])
        // A close frame (opcode 8) from the server: unmasked, its code in the first two payload bytes.
        if (got.length >= 4 && (got[0]! & 0x0f) === 8) {
          clearTimeout(timer)
          socket.destroy()
          resolve({ status: res.statusCode ?? 0, body: {}, closeCode: got.readUInt16BE(2) })
        }
      })
      // A client's frame is masked: FIN + binary, 3 bytes, a zero mask (payload unchanged).
      socket.write(Buffer.from([0x82, 0x83, 0, 0, 0, 0, 1, 2, 3]))
    })
    req.on("response", (res) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text.startsWith("{") ? JSON.parse(text) : {} }))
    })
    req.on("error", reject)
    req.end()
  })

// Needs a real Postgres and NATS for separate processes to share, and nginx (.ci/run installs it).
describe.skipIf(!real || nginxBinary() === undefined)("Parley behind deploy/nginx.conf (real services)", () => {
  const suite = sharedDatabase()

  it("serves the whole product through nginx only", async () => {
    const { db, sql, processes } = suite
    const env = {
      ...db.env,
      NATS_URL: process.env.NATS_URL!,
      BUS_NAMESPACE: `nginx${randomBytes(5).toString("hex")}`,
      TRUSTED_PROXIES: "127.0.0.1",
      GW_CARD_WEBHOOK_SECRET: GW_CARD_SECRET,
      GW_UPI_WEBHOOK_SECRET: GW_UPI_SECRET,
      MAIL_B_WEBHOOK_SECRET: MAIL_B_SECRET,
      CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"),
      SIM_TIME_SCALE: "0.02",
      CALLING_HOURS: "any",
      DIALER_CPS_PER_CARRIER: "100",
      DIALER_CPS_PER_TENANT: "100",
      RUN_CLAIM_INTERVAL_MS: "250",
      SSE_KEEPALIVE_MS: "1000",
      // Scaled by SIM_TIME_SCALE: the discount call holds 20 s for the decision made through nginx.
      APPROVAL_HOLD_MS: "1000000",
    }
    const [apiA, apiB, runtime] = await Promise.all([
      spawnServer({ role: "api", env }),
      spawnServer({ role: "api", env }),
      spawnServer({ role: "runtime", env }),
    ])
    processes.push(apiA!, apiB!, runtime!)

    // Why the file must say proxy_http_version 1.1: the engine answers an HTTP/1.0 request 505.
    const apiPort = Number(portOf(apiA!))
    expect(await rawExchange(apiPort, "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", 1_500)).toMatch(
      /^HTTP\/1\.1 505 /,
    )
    expect(await rawExchange(apiPort, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 5_000)).toMatch(
      /^HTTP\/1\.1 200/,
    )

    const nginx = await startNginx({ upstreams: [apiA!, apiB!].map((p) => `127.0.0.1:${portOf(p)}`) })
    const client = tlsClient(nginx.httpsUrl, nginx.cert)
    try {
      // Plain HTTP only redirects to HTTPS.
      const plain = await fetch(`${nginx.httpUrl}/healthz`, { redirect: "manual" })
      expect(plain.status).toBe(308)
      expect(plain.headers.get("location")).toMatch(/^https:\/\/127\.0\.0\.1\/healthz$/)

      // Both api processes answer through the upstream, and see a runtime process.
      const answeredBy = new Set<string>()
      for (let i = 0; i < 6; i++) {
        const h = await client.request("GET", "/healthz")
        expect(h.status).toBe(200)
        answeredBy.add(h.body.instance.id as string)
      }
      expect(answeredBy.size).toBe(2)
      // The client's request id reaches Parley (and comes back); /metrics is not proxied.
      const traced = await client.request("GET", "/healthz", { headers: { "X-Request-Id": "nginx-smoke-1" } })
      expect(traced.headers.get("x-request-id")).toBe("nginx-smoke-1")
      expect((await client.request("GET", "/healthz")).headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/)
      const metrics = await client.request("GET", "/metrics")
      expect(metrics.status).toBe(404)
      expect(metrics.body).toMatchObject({ code: "NOT_FOUND" })
      await until(
        "a runtime process to answer",
        async () => ((await client.request("GET", "/healthz")).body.status === "ok" ? true : undefined),
        10_000,
      )

      // Signup, the verification link, login.
      const email = `nginx-${randomBytes(4).toString("hex")}@example.com`
      const password = "correct horse battery"
      const signup = await client.request("POST", "/auth/signup", { json: { email, password, country: "US" } })
      expect(signup.status).toBe(201)
      const link = readOutbox(join(db.env.DATA_DIR!, "outbox.jsonl"))
        .filter((m) => m.kind === "verify_email" && m.to === email)
        .at(-1)!.links[0]!
      const verifyToken = new URL(link, nginx.httpsUrl).searchParams.get("token")!
      expect((await client.request("GET", `/auth/verify-email?token=${encodeURIComponent(verifyToken)}`)).status).toBe(
        200,
      )
      const login = await client.request("POST", "/auth/login", { json: { email, password } })
      expect(login.status).toBe(200)
      const token = login.body.token as string
      const tenantId = login.body.tenant.id as number

      // A wallet to run on (the stub gateway, settled through nginx).
      const intent = await client.request("POST", "/billing/topup", { token, json: { amount_minor: 2_000_000 } })
      expect(intent.status).toBe(201)
      expect(
        (
          await client.request("POST", "/billing/webhooks/stub", {
            json: { external_id: intent.body.external_id, status: "succeeded" },
          })
        ).status,
      ).toBe(200)

      // A workflow, its audience (digit 7 asks for a discount: an approval), compliance, a run.
      const w = await client.request("POST", "/api/workflows", {
        token,
        json: {
          nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked.",
        },
      })
      expect(w.status).toBe(201)
      const rows = ["+12025550403", "+12025550414", "+12025550425", "+12025550436", "+12025550447"].map((phone) => ({
        phone,
      }))
      const audience = await client.request("POST", `/api/workflows/${w.body.id}/audience`, { token, json: { rows } })
      expect(audience.body.accepted).toBe(5)
      expect(
        (
          await client.request("PUT", `/api/workflows/${w.body.id}/compliance`, {
            token,
            json: { consent_attestation_text: "Opted in." },
          })
        ).status,
      ).toBe(200)
      const run = await client.request("POST", `/api/workflows/${w.body.id}/run`, { token })
      expect(run.status).toBe(201)
      const runId = run.body.run_id as number

      // The run's turn stream, through nginx's unbuffered SSE location, followed to the end.
      const stream = await client.open(`/api/runs/${runId}/turns/stream`, {
        authorization: `Bearer ${token}`,
        accept: "text/event-stream",
      })
      expect(stream.status).toBe(200)
      expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/)
      let expected = Number.POSITIVE_INFINITY
      const watching = readEvents(stream, (events) => events.length >= expected, 90_000)

      // The approval: decided through nginx while the call waits on it.
      const approval = await until(
        "the concession approval",
        async () => {
          const list = await client.request("GET", `/api/approvals?workflow_id=${w.body.id}&status=pending`, { token })
          return (list.body.approvals as Json[] | undefined)?.[0]
        },
        30_000,
      )
      // The held call's media stream: nginx passes the WebSocket upgrade through to the api process,
      // which lets in the call's token once and refuses a bogus one before any frame.
      const streamToken = await mintStreamToken(sql, tenantId, approval.call_id as number)
      expect(await tlsUpgrade(nginx.httpsUrl, "/media/telco_a/mst_1_bogus", nginx.cert)).toMatchObject({
        status: 401,
        body: { code: "UNAUTHENTICATED" },
      })
      expect(await tlsUpgrade(nginx.httpsUrl, `/media/telco_a/${streamToken}`, nginx.cert)).toMatchObject({
        status: 101,
        closeCode: 1003,
      })
      expect((await tlsUpgrade(nginx.httpsUrl, `/media/telco_a/${streamToken}`, nginx.cert)).status).toBe(401)

      const decided = await client.request("POST", `/api/approvals/${approval.id}/decide`, {
        token,
        json: { decision: "approve", note: "Through nginx." },
      })
      expect(decided.status).toBe(200)
      expect(decided.body).toMatchObject({ id: approval.id, status: "approved" })

      await until(
        "the run to complete",
        async () => {
          const r = await client.request("GET", `/api/workflows/${w.body.id}/runs`, { token })
          return (r.body.runs as Json[]).find((x) => x.id === runId)?.status === "completed" ? true : undefined
        },
        60_000,
      )
      const stored = await sql<{ seq: number }[]>`select seq from turns where run_id = ${runId} order by seq`
      expect(stored.length).toBeGreaterThan(10)
      expected = stored.length
      const { events, comments } = await watching
      expect(events.map((e) => Number(e.id))).toEqual(stored.map((t) => t.seq))
      // Keepalive comments came through while the stream was idle (nothing held in a buffer).
      expect(comments).toBeGreaterThan(0)

      // gw_card under the spec's header name (underscore): nginx forwards it hyphenated.
      const cardEvent = JSON.stringify({
        id: `evt_${randomBytes(8).toString("hex")}`,
        type: "checkout.session.completed",
        data: { object: { id: `cs_${randomBytes(8).toString("hex")}`, amount_total: 500, currency: "usd" } },
      })
      const card = await client.request("POST", "/billing/webhooks/gw_card", {
        body: cardEvent,
        headers: {
          "content-type": "application/json",
          "gw_card-Signature": signGwCard(Buffer.from(cardEvent), GW_CARD_SECRET, Math.floor(Date.now() / 1000)),
        },
      })
      expect(card.status).toBe(200)
      expect(card.body).toMatchObject({ received: true })
      const forgedCard = await client.request("POST", "/billing/webhooks/gw_card", {
        body: cardEvent,
        headers: {
          "content-type": "application/json",
          "gw_card-Signature": signGwCard(Buffer.from(cardEvent), "whsec_wrong", Math.floor(Date.now() / 1000)),
        },
      })
      expect(forgedCard.status).toBe(401)
      expect(forgedCard.body).toMatchObject({ code: "INVALID_SIGNATURE" })

      // gw_upi under X-gw_upi-Signature (and its event id under X-gw_upi-Event-Id).
      const upiEvent = JSON.stringify({
        event: "payment.captured",
        payload: { payment: { entity: { id: `pay_${randomBytes(6).toString("hex")}`, amount: 500, currency: "INR" } } },
      })
      const upiEventId = `evt_${randomBytes(6).toString("hex")}`
      const upi = await client.request("POST", "/billing/webhooks/gw_upi", {
        body: upiEvent,
        headers: {
          "content-type": "application/json",
          "X-gw_upi-Signature": hmacHex(GW_UPI_SECRET, upiEvent),
          "X-gw_upi-Event-Id": upiEventId,
        },
      })
      expect(upi.status).toBe(200)
      expect(upi.body).toMatchObject({ received: true })
      const [upiRow] = await sql<[{ n: number }]>`
        select count(*)::int as n from payment_events where event_id = ${upiEventId}`
      expect(upiRow.n).toBe(1)

      // mail_b under X-mail_b-Signature: a hard bounce suppresses the address.
      const bounced = `bounce-${randomBytes(4).toString("hex")}@example.com`
      const mailEvent = JSON.stringify({
        event: "bounce",
        msgid: `m-${randomBytes(4).toString("hex")}`,
        to: bounced,
        status: "5.1.1",
        reason: "no such user",
        ts: 1,
      })
      const mail = await client.request("POST", "/email/webhooks/mail_b", {
        body: mailEvent,
        headers: { "content-type": "application/json", "X-mail_b-Signature": hmacHex(MAIL_B_SECRET, mailEvent) },
      })
      expect(mail.status).toBe(200)
      expect((await sql`select 1 from email_suppressions where email = ${bounced}`).length).toBe(1)

      // telco_a: a status callback signed for the public URL, https:// as the proxy sees it. Parley
      // rebuilds it from X-Forwarded-Proto/-Host because nginx is in TRUSTED_PROXIES.
      const telcoToken = randomBytes(16).toString("hex")
      expect((await client.request("PUT", "/onboarding/mode", { token, json: { mode: "byok" } })).status).toBe(200)
      const cred = await client.request("PUT", "/onboarding/credentials/telco_a", {
        token,
        json: { primary_id: `AC${randomBytes(16).toString("hex")}`, secret: telcoToken },
      })
      expect(cred.status).toBe(200)
      const path = `/api/telco_a/status?tenant_id=${tenantId}`
      const sid = `CA${randomBytes(16).toString("hex")}`
      const params = { CallSid: sid, CallStatus: "completed", CallDuration: "7" }
      const form = new URLSearchParams(params).toString()
      const formHeaders = { "content-type": "application/x-www-form-urlencoded" }
      const telco = await client.request("POST", path, {
        body: form,
        headers: { ...formHeaders, "X-telco_a-Signature": signTelcoA(telcoToken, nginx.httpsUrl + path, params) },
      })
      expect(telco.status).toBe(200)
      expect(telco.body).toEqual({ received: true })
      const [recorded] = await sql<[{ tenant_id: number; call_status: string }?]>`
        select tenant_id, call_status from telco_unmatched_callbacks where provider_call_id = ${sid}`
      expect(recorded).toEqual({ tenant_id: tenantId, call_status: "completed" })
      // Signed for the http:// URL an api process would see without the proxy's headers: refused.
      const httpUrl = nginx.httpsUrl.replace(/^https:/, "http:") + path
      const wrongScheme = await client.request("POST", path, {
        body: form,
        headers: { ...formHeaders, "X-telco_a-Signature": signTelcoA(telcoToken, httpUrl, params) },
      })
      expect(wrongScheme.status).toBe(401)
      expect(wrongScheme.body.error).toMatch(/signature/)

      // nginx refuses an oversized JSON body itself, in Parley's error shape.
      const big = await client.request("POST", "/auth/login", {
        body: JSON.stringify({ email, password: "x".repeat(2 * 1024 * 1024) }),
        headers: { "content-type": "application/json" },
      })
      expect(big.status).toBe(413)
      expect(big.body).toMatchObject({ code: "PAYLOAD_TOO_LARGE" })
    } finally {
      await client.close()
      const log = nginx.errorLog()
      await nginx.stop()
      // Nothing upstream went wrong along the way.
      expect(log).not.toMatch(/upstream prematurely closed|upstream timed out|no live upstreams/)
    }
  }, 240_000)

  it("fails, the engine refusing nginx's HTTP/1.0, when the file loses proxy_http_version 1.1", async () => {
    const { db, processes } = suite
    const env = { ...db.env, NATS_URL: process.env.NATS_URL!, BUS_NAMESPACE: `nginx${randomBytes(5).toString("hex")}` }
    const apiProc = await spawnServer({ role: "api", env })
    processes.push(apiProc)
    const conf = readFileSync(NGINX_CONF, "utf8")
    expect(conf).toMatch(/^\s*proxy_http_version 1\.1;/m)
    // The same file without the line (nginx then speaks HTTP/1.0; read timeout 2 s, not 120 s).
    const without = conf
      .replace(/^\s*proxy_http_version 1\.1;\n/m, "")
      .replace(/proxy_read_timeout 120s;/, "proxy_read_timeout 2s;")
    const upstreams = [`127.0.0.1:${portOf(apiProc)}`]
    const broken = await startNginx({ upstreams, siteConf: without })
    const fixed = await startNginx({ upstreams })
    try {
      const viaBroken = await tlsClient(broken.httpsUrl, broken.cert).request("GET", "/healthz")
      expect(viaBroken.status).toBe(505)
      const viaFixed = await tlsClient(fixed.httpsUrl, fixed.cert).request("GET", "/healthz")
      expect(viaFixed.status).toBe(200)
    } finally {
      await broken.stop()
      await fixed.stop()
    }
  }, 60_000)
})
