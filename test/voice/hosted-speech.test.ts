// A byok workspace's calls heard through its own speech vendors (issue 38): its stt credential
// points at a local fake of Deepgram's live protocol, its tts credential at a local fake of
// ElevenLabs' input streaming with a voice map for its persona. A simulated run goes through the
// media path: the simulated callee's audio reaches the fake recogniser, whose transcripts the
// conversation answers, and every agent sentence is spoken by the fake voice. When the voice refuses
// the key, the call goes on in the offline voice; when the recogniser's stream is lost mid-call and
// its reconnect refused, the offline recogniser hears the rest of the call; each failure is counted.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { wordsOf } from "../../src/providers/speech/sphinx.recognizer.js"
import { SIM_CALLEE_LINES } from "../../src/providers/telephony/sim.telephony.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { type FakeDeepgram, startFakeDeepgram } from "../support/fake-deepgram.js"
import { type FakeElevenLabsStream, startFakeElevenLabsStream } from "../support/fake-elevenlabs-stream.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const STT_KEY = `dg_${randomBytes(12).toString("hex")}`
const TTS_KEY = `xi_${randomBytes(12).toString("hex")}`
const VOICE = "v_persona_1"
const METRICS_TOKEN = randomBytes(16).toString("hex")

let srv: TestServer
let a: ReturnType<typeof api>
let dg: FakeDeepgram
let el: FakeElevenLabsStream

beforeAll(async () => {
  dg = await startFakeDeepgram({ apiKey: STT_KEY })
  el = await startFakeElevenLabsStream({ apiKey: TTS_KEY, voices: [VOICE] })
  srv = await startTestServer({
    env: {
      ...FAST_RUNTIME_ENV,
      // Five times real time: the calls' audio paced at that, the vendors' fakes keep up.
      SIM_TIME_SCALE: "0.2",
      MEDIA_STREAMS: "all",
      CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"),
      ALLOW_PRIVATE_PROVIDER_URLS: "true",
      METRICS_TOKEN,
      // The platform's own hosted accounts (bundled workspaces), on the same fakes.
      STT_API_KEY: STT_KEY,
      STT_API_URL: dg.httpUrl,
      SPEECH_API_URL: el.httpUrl,
      SPEECH_API_KEY: TTS_KEY,
      SPEECH_DEFAULT_VOICE_ID: VOICE,
    },
  })
  a = api(srv)
}, 30_000)
afterAll(async () => {
  await srv?.stop()
  await dg?.close()
  await el?.close()
})

/** Vendor failures counted at `stage` (parley_voice_provider_failures_total). */
const failuresCounted = async (stage: "recognition" | "synthesis") => {
  const res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
  const m = new RegExp(`parley_voice_provider_failures_total\\{stage="${stage}"\\} (\\d+)`).exec(await res.text())
  return m === null ? 0 : Number(m[1])
}

const call = async (s: Session, method: string, path: string, body?: unknown) => {
  const res = await a.call(method, path, { token: s.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

/** A byok workspace with the fakes as its vendors, and a finished run of one agreeing callee. */
async function runWithOwnVendors(): Promise<{ s: Session; runId: number; persona: string }> {
  const s = await a.signup({ country: "US" })
  expect((await call(s, "PUT", "/onboarding/mode", { mode: "byok" })).status).toBe(200)
  const w = (await call(s, "POST", "/api/workflows", { nl_prompt: "Invite members to renew their plan." })).body
  const persona = (w.rule_book as Json).persona as string
  const stt = await call(s, "PUT", "/onboarding/credentials/stt", {
    secret: STT_KEY,
    extra: { api_base_url: dg.httpUrl },
  })
  expect(stt.status).toBe(200)
  const tts = await call(s, "PUT", "/onboarding/credentials/tts", {
    secret: TTS_KEY,
    extra: { api_base_url: el.httpUrl, voice_map: { [persona]: VOICE } },
  })
  expect(tts.status).toBe(200)
  const intent = (await call(s, "POST", "/billing/topup", { amount_minor: 1_000_000 })).body
  await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
  await call(s, "POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550113", name: "Ann" }] })
  await call(s, "PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
  const run = await call(s, "POST", `/api/workflows/${w.id}/run`)
  expect(run.status).toBe(201)
  const runId = run.body.run_id as number
  const deadline = Date.now() + 90_000
  for (;;) {
    const [r] = await srv.sql<[{ status: string }]>`select status from runs where id = ${runId}`
    if (r.status === "completed") break
    if (Date.now() > deadline) throw new Error(`the run is still ${r.status}`)
    await new Promise((res) => setTimeout(res, 300))
  }
  return { s, runId, persona }
}

describe("a byok workspace's own speech vendors on the media path", () => {
  it("hears the callee through its recogniser and speaks every sentence in its voice", async () => {
    // What the fake recogniser hears the callee say, utterance by utterance.
    dg.say(Array(12).fill("Yes, that sounds good, go ahead."))
    const before = { dg: dg.connections.length, el: el.connections.length }
    const { s, runId } = await runWithOwnVendors()

    const [target] = await srv.sql<[{ outcome: string }]>`select outcome from run_targets where run_id = ${runId}`
    expect(target.outcome).toBe("agreed")
    // The recogniser's stream: the workspace's key, μ-law 8 kHz, the callee's audio in it.
    const heard = dg.connections.slice(before.dg)
    expect(heard.length).toBeGreaterThanOrEqual(1)
    expect(heard[0]!.headers.authorization).toBe(`Token ${STT_KEY}`)
    expect(heard[0]!.query).toMatchObject({ encoding: "mulaw", sample_rate: "8000" })
    expect(heard.reduce((n, c) => n + c.audioBytes, 0)).toBeGreaterThan(8000) // more than a second of speech
    const turns = await srv.sql<{ speaker: string; text: string }[]>`
      select speaker, text from turns where run_id = ${runId} order by turn_index`
    // The callee's turns are the recogniser's transcripts.
    const callee = turns.filter((t) => t.speaker === "callee")
    expect(callee.length).toBeGreaterThanOrEqual(1)
    for (const t of callee) expect(t.text).toBe("Yes, that sounds good, go ahead.")
    // Each sentence the agent said went to the voice: the persona's mapped voice, with the workspace's key.
    const spoken = el.connections.slice(before.el)
    expect(spoken.length).toBeGreaterThanOrEqual(2)
    for (const c of spoken) {
      expect(c.voiceId).toBe(VOICE)
      expect(c.headers["xi-api-key"]).toBe(TTS_KEY)
      expect(c.query.output_format).toBe("ulaw_8000")
    }
    const sentTexts = spoken.flatMap((c) =>
      c.messages.map((m) => String((m as { text?: unknown }).text ?? "").trim()).filter((t) => t !== ""),
    )
    const opening = turns.find((t) => t.speaker === "agent")!.text
    expect(opening.startsWith(sentTexts[0]!)).toBe(true)
    const [c] = await srv.sql<[{ id: number }]>`select id from calls where run_id = ${runId}`
    expect((await call(s, "GET", `/api/calls/${c.id}`)).body.provider_failures).toEqual([])
  }, 120_000)

  it("goes on in the offline voice when the vendor refuses the key, and counts the failure", async () => {
    el.refuseNext(1000, 401)
    dg.say(Array(12).fill("Yes, that sounds good, go ahead."))
    const metric = () => failuresCounted("synthesis")
    const before = await metric()
    const { s, runId } = await runWithOwnVendors()
    const [target] = await srv.sql<[{ outcome: string }]>`select outcome from run_targets where run_id = ${runId}`
    expect(target.outcome).toBe("agreed")
    // The agent was heard all the same: its turns were spoken (the offline voice), the failure counted once a call.
    const agent = await srv.sql<{ text: string }[]>`
      select text from turns where run_id = ${runId} and speaker = 'agent'`
    expect(agent.length).toBeGreaterThanOrEqual(2)
    expect(await metric()).toBe(before + 1)
    // The call's record says which vendor failed it, and when (the console's call view shows it).
    const [c] = await srv.sql<[{ id: number }]>`select id from calls where run_id = ${runId}`
    const view = (await call(s, "GET", `/api/calls/${c.id}`)).body
    expect(view.provider_failures).toHaveLength(1)
    expect(view.provider_failures[0]).toMatchObject({ stage: "synthesis", provider: "elevenlabs" })
    expect(view.provider_failures[0].message).not.toContain(TTS_KEY)
  }, 120_000)

  it("hears the rest of the call offline when the recogniser's stream is lost and its reconnect refused", async () => {
    el.refuseNext(0) // the voice works again
    const line = "Yes, that sounds good, go ahead."
    dg.say(Array(12).fill(line))
    // The stream closes 1011 once it has answered the callee's first utterance; the reconnect meets a 402.
    dg.dropNext({ afterUtterances: 1, thenRefuse: { n: 1, status: 402 } })
    const before = { upgrades: dg.upgrades.length, failures: await failuresCounted("recognition") }
    const { s, runId } = await runWithOwnVendors()
    const [target] = await srv.sql<[{ outcome: string }]>`select outcome from run_targets where run_id = ${runId}`
    expect(target.outcome).toBe("agreed")
    expect(dg.upgrades.slice(before.upgrades).map((u) => u.status)).toEqual([101, 402])
    // The first turn is the vendor's transcript; the later ones the offline recogniser's (PocketSphinx spells a
    // simulator line in lower-case words, the stand-in told the callee's script says it as written).
    const [first, ...later] = await srv.sql<{ text: string }[]>`
      select text from turns where run_id = ${runId} and speaker = 'callee' order by turn_index`
    expect(first!.text).toBe(line)
    expect(later.length).toBeGreaterThanOrEqual(1)
    const offline = [...SIM_CALLEE_LINES, ...SIM_CALLEE_LINES.map((l) => wordsOf(l).join(" "))]
    for (const t of later) expect(offline).toContain(t.text)
    expect(await failuresCounted("recognition")).toBe(before.failures + 1)
    const [c] = await srv.sql<[{ id: number }]>`select id from calls where run_id = ${runId}`
    const failures = (await call(s, "GET", `/api/calls/${c.id}`)).body.provider_failures as Json[]
    expect(failures).toHaveLength(1)
    expect(failures[0]).toMatchObject({ stage: "recognition", provider: "deepgram" })
    expect(failures[0]!.message).not.toContain(STT_KEY)
  }, 120_000)
})

describe("the platform's hosted speech", () => {
  it("hears and speaks a bundled workspace's calls, and prices them into the call", async () => {
    dg.say(Array(12).fill("Yes, that sounds good, go ahead."))
    const before = { dg: dg.connections.length, el: el.connections.length }
    const s = await a.signup({ country: "US" })
    const w = (await call(s, "POST", "/api/workflows", { nl_prompt: "Invite members to renew their plan." })).body
    await call(s, "POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550114", name: "Bo" }] })
    await call(s, "PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
    const runId = (await call(s, "POST", `/api/workflows/${w.id}/run`)).body.run_id as number
    await expect
      .poll(async () => (await srv.sql`select status from runs where id = ${runId}`)[0]!.status, { timeout: 90_000 })
      .toBe("completed")
    // The platform's key went to both vendors.
    expect(dg.connections.slice(before.dg)[0]!.headers.authorization).toBe(`Token ${STT_KEY}`)
    expect(el.connections.slice(before.el).map((c) => c.voiceId)).toContain(VOICE)
    // The call was held and charged at the bundled rate with both hosted parts ($0.10 + $0.01 + $0.04 a minute).
    const [c] = await srv.sql<[{ id: number }]>`select id from calls where run_id = ${runId}`
    const [r] = await srv.sql<[{ rate: string; parts: string[]; reserved: string; settled: string }]>`
      select rate_per_minute_minor as rate, hosted_speech as parts, reserved_minor as reserved,
        settled_minor as settled
      from usage_reservations where call_ref = ${`call:${c.id}`}`
    expect({ rate: Number(r.rate), parts: r.parts }).toEqual({ rate: 15, parts: ["recognition", "voice"] })
    expect(Number(r.settled)).toBeGreaterThan(0)
    // What the wallet paid is the settlement: the hold, less what was released.
    const [ledger] = await srv.sql<[{ net: string }]>`
      select coalesce(sum(amount_minor), 0) as net from ledger_entries
      where reference = ${`call:${c.id}`} and kind in ('call_reservation', 'call_release')`
    expect(-Number(ledger.net)).toBe(Number(r.settled))
    // The catalogue says what it costs.
    const pricing = (await (await fetch(`${srv.url}/pricing`)).json()) as Json
    expect(pricing.hosted_speech).toMatchObject({
      recognition_per_minute_minor: { USD: 1 },
      voice_per_minute_minor: { USD: 4 },
    })
  }, 120_000)
})
