// telco_a calls heard as audio (MEDIA_STREAMS=telco_a, the default): the answered call's voice
// webhook is answered with <Connect><Stream> to a URL carrying a single-use token; the fake carrier
// connects there over the media-stream protocol, hears the agent's audio, and speaks the callee's
// lines aloud; the runtime recognises them with PocketSphinx's general English model, the
// conversation answers, and Parley ends the call by closing the stream and hanging up over REST.
import { randomBytes } from "node:crypto"
import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { mintStreamToken } from "../../src/calls/media-stream-tokens.repo.js"
import { speakForPhone } from "../../src/providers/speech/flite.phone.js"
import { sentencesOf } from "../../src/providers/speech/sentences.js"
import { SphinxDecoder, sphinxAvailable, wordsOf } from "../../src/providers/speech/sphinx.recognizer.js"
import { signTelcoA } from "../../src/providers/telephony/telco-a.signature.js"
import { findVoice } from "../../src/voices/voices.catalog.js"
import { api } from "../support/clients.js"
import { type FakeTelco, startFakeTelco } from "../support/fake-telco.js"
import { type FakeCall, fakeOutboundCalls } from "../support/fake-telco-calls.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { freePort } from "../support/nginx.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const required = process.env.REQUIRE_POCKETSPHINX === "1"
let srv: TestServer
let fake: FakeTelco
let calls: Map<string, FakeCall>
let a: ReturnType<typeof api>

beforeAll(async () => {
  fake = await startFakeTelco()
  calls = fakeOutboundCalls(fake)
  const port = await freePort()
  srv = await startTestServer({
    env: {
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"),
      ALLOW_PRIVATE_PROVIDER_URLS: "true",
      // Rings and retries fast; the call itself runs in real time (capped at a fifth of the book's 300 s).
      SIM_TIME_SCALE: "0.2",
      CALLING_HOURS: "any",
      RUN_CLAIM_INTERVAL_MS: "200",
      MEDIA_STREAMS: "telco_a",
    },
  })
  a = api(srv)
}, 30_000)
afterAll(async () => {
  await srv?.stop()
  await fake?.close()
})

const call = async (method: string, path: string, s: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

describe.skipIf(!required && !sphinxAvailable())("a telco_a call on a media stream", () => {
  it("is bridged with a token, spoken and heard as audio, and ended by Parley", async () => {
    const account = fake.addAccount()
    const s = await a.signup({ country: "US" })
    // A name the recogniser can spell (the default names the owner's made-up address).
    expect((await call("PATCH", "/api/workspace", s, { name: "River Fitness" })).status).toBe(200)
    expect((await call("PUT", "/onboarding/mode", s, { mode: "byok" })).status).toBe(200)
    await call("PUT", "/onboarding/credentials/telco_a", s, {
      primary_id: account.sid,
      secret: account.token,
      extra: { api_base_url: fake.url, caller_id: "+14155550000" },
    })
    const intent = (await call("POST", "/billing/topup", s, { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const w = (await call("POST", "/api/workflows", s, { nl_prompt: "Invite members to renew their plan." })).body
    await call("POST", `/api/workflows/${w.id}/audience`, s, { rows: [{ phone: "+12025550466", name: "Ann" }] })
    await call("PUT", `/api/workflows/${w.id}/compliance`, s, { consent_attestation_text: "Opted in." })
    const run = await call("POST", `/api/workflows/${w.id}/run`, s)
    expect(run.status).toBe(201)
    const runId = run.body.run_id as number
    for (let i = 0; i < 240; i++) {
      const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${runId}`
      if (r.status === "completed") break
      await new Promise((res) => setTimeout(res, 250))
    }
    const [target] = await srv.sql<[{ outcome: string }]>`select outcome from run_targets where run_id = ${runId}`
    expect(target.outcome).toBe("declined")

    const fakeCall = [...calls.values()].filter((c) => c.to === "+12025550466").at(-1)!
    // The stream URL came in the TwiML with a token, on the api's address; nothing was said with <Say>.
    expect(fakeCall.streamUrl).toMatch(new RegExp(`^${srv.url.replace("http", "ws")}/media/telco_a/mst_\\d+_`))
    expect(fakeCall.heard).toEqual([])
    // Parley hung up over REST once the conversation ended.
    expect(fakeCall.status).toBe("completed")

    const turns = await srv.sql<{ speaker: string; text: string }[]>`
      select speaker, text from turns where run_id = ${runId} order by turn_index`
    // The callee's spoken line was recognised and answered.
    const callee = turns.filter((t) => t.speaker === "callee")
    expect(callee.length).toBeGreaterThanOrEqual(1)
    expect(callee[0]!.text).toContain("not interested")
    // The carrier heard the agent's opening in the persona's voice, sentence after sentence, frame for
    // frame; and a recogniser listening for the opening's sentences finds each it can spell where it was.
    const persona = findVoice(((await call("GET", `/api/workflows/${w.id}`, s)).body.rule_book as Json).persona)!
    const opening = sentencesOf(turns[0]!.text)
    const heard = fakeCall.agentAudio!
    const ear = SphinxDecoder.create()
    try {
      const kept = new Set(ear.listenFor(opening))
      expect(kept.size).toBeGreaterThan(0)
      let at = 0
      for (const sentence of opening) {
        const { frames } = await speakForPhone(sentence, persona.speech)
        const got = heard.slice(at, at + frames.length)
        expect(Buffer.concat(got).equals(Buffer.concat(frames))).toBe(true)
        if (kept.has(wordsOf(sentence).join(" "))) {
          for (const f of got) ear.frame(f)
          expect(ear.end()).toBe(wordsOf(sentence).join(" "))
        }
        at += frames.length
      }
    } finally {
      ear.free()
    }

    // The fake signed its upgrade as telco_a does; one not signed with the workspace's token over the
    // URL it was given is refused, and the refusal does not spend the token (the call, live a moment).
    const [{ id: callId }] = await srv.sql<[{ id: number }]>`select id from calls where run_id = ${runId}`
    const base = `${srv.url.replace("http", "ws")}/media/telco_a/`
    const token = await mintStreamToken(srv.sql, s.tenantId, callId, { signedBase: base })
    const unsigned = await mintStreamToken(srv.sql, s.tenantId, callId)
    await srv.sql`update calls set status = 'connected' where id = ${callId}`
    try {
      for (const signature of [
        undefined,
        signTelcoA(fake.addAccount().token, base + token),
        signTelcoA(account.token, `${base}${token}?x=1`),
        "not base64 at all",
      ]) {
        const refused = await upgrade(base + token, signature)
        expect(refused.status).toBe(401)
        expect(JSON.parse(refused.body).code).toBe("INVALID_SIGNATURE")
      }
      expect((await upgrade(base + token, signTelcoA(account.token, base + token))).status).toBe(101)
      expect((await upgrade(base + token, signTelcoA(account.token, base + token))).status).toBe(401)
      // A simulated call's token (minted without an address to sign) needs none.
      expect((await upgrade(base + unsigned, undefined)).status).toBe(101)
    } finally {
      await srv.sql`update calls set status = 'ended' where id = ${callId}`
    }
  }, 120_000)
})

/** An upgrade to `url` (a stream's), signed as given: the status and body it is answered with. */
function upgrade(url: string, signature: string | undefined): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url.replace(/^ws/, "http"), {
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
        "Sec-WebSocket-Version": "13",
        ...(signature !== undefined && { "X-telco_a-Signature": signature }),
      },
    })
    req.on("upgrade", (res, socket) => {
      socket.destroy()
      resolve({ status: res.statusCode ?? 0, body: "" })
    })
    req.on("response", (res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on("error", reject)
    req.end()
  })
}
