// A recorded call end to end (issue 38, item 2): a simulated run on the media path whose rule book
// discloses recording; the finished call's recording is in GET /api/calls/{id} and plays from
// GET /api/calls/{id}/recording (ranges included) with both sides in it; a workflow that turns
// recording off keeps none; a data-subject export links a zip of the contact's recordings, and an
// erase deletes them (the link's zip is then empty).
import { unzipSync } from "fflate"
import OpusScript from "opusscript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseOpusHead, readOggPackets } from "../../src/providers/audio/ogg-opus.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session
let other: Session

beforeAll(async () => {
  srv = await startTestServer({
    // A fifth of real time, the fastest the engines follow (faster, a sketched voice speaks and nothing is kept).
    env: { ...FAST_RUNTIME_ENV, SIM_TIME_SCALE: "0.2", MEDIA_STREAMS: "all" },
  })
  a = api(srv)
  ;[s, other] = await Promise.all([a.signup({ country: "US" }), a.signup({ country: "US" })])
}, 30_000)
afterAll(async () => srv?.stop())

const call = async (who: Session, method: string, path: string, body?: unknown, headers?: Record<string, string>) => {
  const res = await a.call(method, path, { token: who.token, ...(body !== undefined && { body }), headers })
  return { status: res.status, headers: res.headers, body: res }
}
const jsonOf = async (who: Session, method: string, path: string, body?: unknown) => {
  const r = await call(who, method, path, body)
  return { status: r.status, body: (await r.body.json()) as Json }
}

/** A finished run of one agreeing callee at `phone`; the call's id. */
async function runOne(phone: string, ruleBook?: Json): Promise<number> {
  const w = (await jsonOf(s, "POST", "/api/workflows", { nl_prompt: "Invite members to renew their plan." })).body
  if (ruleBook !== undefined)
    expect((await jsonOf(s, "PUT", `/api/workflows/${w.id}`, { rule_book: ruleBook })).status).toBe(200)
  await jsonOf(s, "POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone, name: "Ann" }] })
  await jsonOf(s, "PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Opted in." })
  const runId = (await jsonOf(s, "POST", `/api/workflows/${w.id}/run`)).body.run_id as number
  await expect
    .poll(async () => (await srv.sql`select status from runs where id = ${runId}`)[0]!.status, { timeout: 60_000 })
    .toBe("completed")
  const [c] = await srv.sql<[{ id: number }]>`select id from calls where run_id = ${runId} order by id desc limit 1`
  return Number(c.id)
}

/** The decoded samples of an Ogg Opus file, and its channel count. */
function decodeOgg(bytes: Uint8Array): { channels: number; pcm: Int16Array } {
  const { packets } = readOggPackets(bytes)
  const channels = parseOpusHead(packets[0]!).channels
  const decoder = new OpusScript(48_000, channels as 1 | 2, OpusScript.Application.VOIP)
  const out: Int16Array[] = []
  for (const p of packets.slice(2)) {
    const d = decoder.decode(Buffer.from(p))
    out.push(new Int16Array(d.buffer, d.byteOffset, d.byteLength / 2).slice())
  }
  decoder.delete()
  const pcm = new Int16Array(out.reduce((n, x) => n + x.length, 0))
  let at = 0
  for (const x of out) {
    pcm.set(x, at)
    at += x.length
  }
  return { channels, pcm }
}

/** The loudest 20 ms window's RMS of one channel. */
function loudest(pcm: Int16Array, channels: number, channel: number): number {
  const window = 960 * channels
  let best = 0
  for (let at = 0; at + window <= pcm.length; at += window) {
    let sum = 0
    for (let i = at + channel; i < at + window; i += channels) sum += pcm[i]! * pcm[i]!
    best = Math.max(best, Math.sqrt(sum / 960))
  }
  return best
}

const PHONE = "+12025550163"
let callId: number

describe("a recorded call", () => {
  it("is kept, both sides, and plays from the API with ranges", async () => {
    callId = await runOne(PHONE)
    const view = await jsonOf(s, "GET", `/api/calls/${callId}`)
    const rec = await expect
      .poll(async () => (await jsonOf(s, "GET", `/api/calls/${callId}`)).body.recording, { timeout: 15_000 })
      .not.toBeNull()
      .then(async () => (await jsonOf(s, "GET", `/api/calls/${callId}`)).body.recording as Json)
    expect(view.status).toBe(200)
    expect(rec.url).toBe(`/api/calls/${callId}/recording`)
    expect(rec.duration_ms).toBeGreaterThan(2_000)
    // Each turn's start is marked: the agent spoke first.
    expect(rec.cues.length).toBeGreaterThanOrEqual(2)
    expect(rec.cues[0].speaker).toBe("agent")
    expect(rec.cues.some((c: Json) => c.speaker === "callee")).toBe(true)
    expect(new Date(rec.expires_at).getTime() - Date.now()).toBeGreaterThan(89 * 86_400_000) // 90 days

    const whole = await call(s, "GET", rec.url)
    expect(whole.status).toBe(200)
    expect(whole.headers.get("content-type")).toBe("audio/ogg")
    expect(whole.headers.get("accept-ranges")).toBe("bytes")
    const mixed = new Uint8Array(await whole.body.arrayBuffer())
    expect(mixed.length).toBe(rec.bytes)
    expect(decodeOgg(mixed).channels).toBe(1)

    // What each side said is on its own channel of the stereo track.
    const sides = new Uint8Array(await (await call(s, "GET", rec.sides_url)).body.arrayBuffer())
    const stereo = decodeOgg(sides)
    expect(stereo.channels).toBe(2)
    expect(loudest(stereo.pcm, 2, 0)).toBeGreaterThan(500) // the callee
    expect(loudest(stereo.pcm, 2, 1)).toBeGreaterThan(500) // the agent

    const first = await call(s, "GET", rec.url, undefined, { range: "bytes=0-99" })
    expect(first.status).toBe(206)
    expect(first.headers.get("content-range")).toBe(`bytes 0-99/${rec.bytes}`)
    expect(Buffer.from(await first.body.arrayBuffer()).equals(Buffer.from(mixed.subarray(0, 100)))).toBe(true)
    const tail = await call(s, "GET", rec.url, undefined, { range: "bytes=-10" })
    expect(Buffer.from(await tail.body.arrayBuffer()).equals(Buffer.from(mixed.subarray(-10)))).toBe(true)
    const past = await call(s, "GET", rec.url, undefined, { range: `bytes=${rec.bytes}-` })
    expect(past.status).toBe(416)
    expect(past.headers.get("content-range")).toBe(`bytes */${rec.bytes}`)
    expect(((await past.body.json()) as Json).code).toBe("RANGE_NOT_SATISFIABLE")

    // Another workspace sees nothing of it.
    expect((await call(other, "GET", rec.url)).status).toBe(404)
    expect((await call(s, "GET", `${rec.url}?track=both`)).status).toBe(422)
  }, 90_000)

  it("is not kept when the workflow turns recording off", async () => {
    const id = await runOne("+12025550164", { recording: false })
    await new Promise((r) => setTimeout(r, 1_000))
    expect((await jsonOf(s, "GET", `/api/calls/${id}`)).body.recording).toBeNull()
    expect((await call(s, "GET", `/api/calls/${id}/recording`)).status).toBe(404)
  }, 90_000)

  it("is in the contact's data-subject export, and gone after an erase", async () => {
    const exported = await jsonOf(s, "POST", "/dsr/export", { contact_identifier: PHONE })
    expect(exported.status).toBe(200)
    const link = exported.body.recordings_zip_url as string
    expect(link).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/dsr\/recordings\//)
    // The link is the credential: no session needed, and a forged one is refused.
    const zip = await fetch(link)
    expect(zip.status).toBe(200)
    expect(zip.headers.get("content-type")).toBe("application/zip")
    const files = unzipSync(new Uint8Array(await zip.arrayBuffer()))
    expect(Object.keys(files).sort()).toEqual([`call-${callId}-mixed.ogg`, `call-${callId}-sides.ogg`])
    const api = new Uint8Array(await (await call(s, "GET", `/api/calls/${callId}/recording`)).body.arrayBuffer())
    expect(Buffer.from(files[`call-${callId}-mixed.ogg`]!).equals(Buffer.from(api))).toBe(true)
    const token = link.split("/").pop()!
    const forged = `${token.slice(0, -4)}${token.slice(-4) === "AAAA" ? "BBBB" : "AAAA"}`
    expect((await fetch(link.replace(token, forged))).status).toBe(404)
    // A contact with no recordings gets no link.
    expect((await jsonOf(s, "POST", "/dsr/export", { contact_identifier: "+12025550199" })).body).not.toHaveProperty(
      "recordings_zip_url",
    )

    const erased = await jsonOf(s, "POST", "/dsr/erase", { contact_identifier: PHONE })
    expect(erased.status).toBe(200)
    expect(erased.body.erased.recordings).toBe(2)
    expect((await call(s, "GET", `/api/calls/${callId}/recording`)).status).toBe(404)
    const [left] = await srv.sql<[{ n: number }]>`select count(*)::int as n from recordings where call_id = ${callId}`
    expect(left.n).toBe(0)
    const [chunks] = await srv.sql<[{ n: number }]>`select count(*)::int as n from recording_chunks`
    const [rows] = await srv.sql<[{ n: number }]>`select count(*)::int as n from recordings`
    expect(chunks.n > 0).toBe(rows.n > 0) // no chunk outlives its recording
    // The export's link now holds nothing of the contact.
    expect(Object.keys(unzipSync(new Uint8Array(await (await fetch(link)).arrayBuffer())))).toEqual([])
  }, 60_000)
})
