// POST /demo/clone-voice and /demo/voice-preview through the real server: an anonymous clone with a
// random public id, its preview as MP3 (text capped), a workspace's voice refused (404), the per-IP
// cap (429), and the sweeper removing expired clones' rows, clips and files (fast clock).
import { createHash } from "node:crypto"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sweepDemo } from "../../src/demo/demo.sweeper.js"
import { demoVoicePreview } from "../../src/demo/demo.voices.js"
import { Clock } from "../../src/platform/Clock.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { postClone, wav } from "../voices/fixtures.js"

const CLONES_PER_IP = 2
const TTL_MINUTES = 60
const TEXT_MAX = 200

let srv: TestServer
let owner: Session
beforeAll(async () => {
  srv = await startTestServer({
    env: {
      TRUSTED_PROXIES: "127.0.0.1",
      DEMO_CLONES_PER_IP_DAY: String(CLONES_PER_IP),
      DEMO_CLONE_TTL_MINUTES: String(TTL_MINUTES),
      DEMO_PREVIEW_TEXT_MAX_CHARS: String(TEXT_MAX),
    },
  })
  owner = await api(srv).signup({ country: "US" })
})
afterAll(async () => srv?.stop())

let ipSeq = 0
const nextIp = () => `192.0.2.${++ipSeq}`

interface DemoVoice {
  voice_id: string
  script: string
  expires_at: string
}

function cloneDemo(sample: Buffer | undefined, ip: string, name?: string): Promise<Response> {
  const body = new FormData()
  if (name !== undefined) body.set("name", name)
  if (sample !== undefined) body.set("sample", new Blob([sample], { type: "audio/wav" }), "me.wav")
  return fetch(`${srv.url}/demo/clone-voice`, { method: "POST", body, headers: { "x-forwarded-for": ip } })
}

async function cloned(sample: Buffer, ip = nextIp()): Promise<DemoVoice> {
  const res = await cloneDemo(sample, ip)
  if (res.status !== 200) throw new Error(`clone ${res.status}: ${await res.text()}`)
  return (await res.json()) as DemoVoice
}

const preview = (body: unknown) =>
  fetch(`${srv.url}/demo/voice-preview`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  })

const sha = (b: Buffer) => createHash("sha256").update(b).digest()
const sampleFile = (bytes: Buffer) => join(srv.config.dataDir, "voice-samples", `${sha(bytes).toString("hex")}.wav`)
/** The demo voice a public id names, by its hash (as the server finds it). */
const avatarOf = async (voiceId: string) =>
  (
    await srv.sql<{ id: number; tenant_id: number | null; expires_at: Date | null }[]>`
      select v.id, v.tenant_id, v.expires_at from demo_voices d join voice_avatars v on v.id = d.voice_avatar_id
      where d.token_sha256 = sha256(convert_to(${voiceId}, 'UTF8'))`
  )[0]

describe("cloning without an account", () => {
  it("200 {voice_id, script, expires_at}: a random id, an ownerless row that expires, the sample kept", async () => {
    const bytes = wav({ hz: 140, seconds: 6 })
    const before = Date.now()
    const v = await cloned(bytes)
    expect(v.voice_id).toMatch(/^dv_[A-Za-z0-9_-]{43}$/)
    expect(v.script.length).toBeGreaterThan(20)
    expect(v.script.length).toBeLessThanOrEqual(TEXT_MAX)
    const expires = Date.parse(v.expires_at)
    expect(expires - before).toBeGreaterThanOrEqual(TTL_MINUTES * 60_000 - 1000)
    expect(expires - Date.now()).toBeLessThanOrEqual(TTL_MINUTES * 60_000)
    const avatar = await avatarOf(v.voice_id)
    expect(avatar).toMatchObject({ tenant_id: null, expires_at: new Date(v.expires_at) })
    expect(existsSync(sampleFile(bytes))).toBe(true)
  })

  it("refuses what a workspace's clone refuses: no sample, a one-second clip (422 on sample)", async () => {
    const ip = nextIp()
    const missing = await cloneDemo(undefined, ip)
    expect(missing.status).toBe(422)
    expect(await missing.json()).toMatchObject({ code: "VALIDATION_FAILED", field: "sample" })
    const short = await cloneDemo(wav({ hz: 200, seconds: 1 }), nextIp())
    expect(short.status).toBe(422)
    expect(((await short.json()) as { error: string }).error).toMatch(/5 s to 5 min/)
  })

  it("caps clones per address a day: 429 with Retry-After", async () => {
    const ip = nextIp()
    for (let i = 0; i < CLONES_PER_IP; i++) await cloned(wav({ hz: 150 + i, seconds: 5 }), ip)
    const res = await cloneDemo(wav({ hz: 170, seconds: 5 }), ip)
    expect(res.status).toBe(429)
    const retryAfter = Number(res.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(86_000)
    expect(await res.json()).toMatchObject({ code: "RATE_LIMITED", retry_after_seconds: retryAfter })
  })
})

describe("POST /demo/voice-preview", () => {
  let voice: DemoVoice
  beforeAll(async () => {
    voice = await cloned(wav({ hz: 118, seconds: 6 }))
  })

  it("speaks the script (or the text given) in the demo voice, as MP3", async () => {
    const res = await preview({ voice_id: voice.voice_id })
    expect(res.status, await res.clone().text()).toBe(200)
    expect(res.headers.get("content-type")).toBe("audio/mpeg")
    const audio = Buffer.from(await res.arrayBuffer())
    // An MP3 frame (sync word) or an ID3 tag.
    expect(audio[0] === 0xff || audio.subarray(0, 3).toString() === "ID3").toBe(true)
    const other = Buffer.from(
      await (await preview({ voice_id: voice.voice_id, text: "Hello from my voice." })).arrayBuffer(),
    )
    expect(other.length).toBeGreaterThan(0)
    expect(other.equals(audio)).toBe(false)
    // The catalogue voice it borrows a language from sounds different.
    const persona = await fetch(`${srv.url}/api/workflows/preview-opening`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "Hello from my voice.", persona: "kai" }),
    })
    const clipUrl = ((await persona.json()) as { mp3_url: string }).mp3_url
    const catalogue = Buffer.from(await (await fetch(clipUrl)).arrayBuffer())
    expect(catalogue.equals(other)).toBe(false)
  })

  it("caps the text: 422 past DEMO_PREVIEW_TEXT_MAX_CHARS", async () => {
    const res = await preview({ voice_id: voice.voice_id, text: "a".repeat(TEXT_MAX + 1) })
    expect(res.status).toBe(422)
    expect(await res.json()).toMatchObject({ code: "VALIDATION_FAILED", field: "text" })
    expect((await preview({ voice_id: voice.voice_id, text: "b".repeat(TEXT_MAX) })).status).toBe(200)
  })

  it("404 for a workspace's voice id (as a number or a string), an unknown id, or a clone past its TTL", async () => {
    const res = await postClone(srv.url, owner.token, {
      name: "Mine",
      sample: { bytes: wav({ hz: 125, seconds: 5 }), filename: "me.wav", type: "audio/wav" },
    })
    expect(res.status).toBe(201)
    const { id } = (await res.json()) as { id: number }
    for (const voice_id of [id, String(id), `dv_${"x".repeat(43)}`, "dv_short"]) {
      const r = await preview({ voice_id })
      expect(r.status, String(voice_id)).toBe(404)
      expect(await r.json()).toMatchObject({ code: "NOT_FOUND" })
    }
    const late = await srv.running.runtime.runPromise(
      demoVoicePreview({ voiceId: voice.voice_id, text: undefined, ip: "192.0.2.200" }).pipe(
        Effect.either,
        Effect.provide(Clock.fixed(new Date(Date.now() + TTL_MINUTES * 60_000 + 1000)).layer),
      ),
    )
    expect(late._tag === "Left" && late.left._tag).toBe("NotFound")
  })
})

describe("the sweeper", () => {
  it("removes expired demo clones after the TTL: rows, preview clips and files; a shared sample stays", async () => {
    const own = wav({ hz: 131, seconds: 5 })
    const shared = wav({ hz: 133, seconds: 5 })
    const a = await cloned(own)
    const b = await cloned(shared)
    // A workspace's voice made from the same bytes as b's.
    const ws = await postClone(srv.url, owner.token, {
      name: "Same bytes",
      sample: { bytes: shared, filename: "me.wav", type: "audio/wav" },
    })
    expect(ws.status).toBe(201)
    expect((await preview({ voice_id: a.voice_id })).status).toBe(200)
    const aId = (await avatarOf(a.voice_id))!.id
    const clips = async () =>
      (await srv.sql<[{ n: number }]>`select count(*)::int as n from speech_clips where voice_avatar_id = ${aId}`)[0].n
    expect(await clips()).toBe(1)

    const sweep = (at: number) => srv.running.runtime.runPromise(sweepDemo(new Date(at)))
    // Half way through the TTL nothing goes.
    expect((await sweep(Date.now() + (TTL_MINUTES / 2) * 60_000)).voices).toBe(0)
    expect(await avatarOf(a.voice_id)).toBeDefined()

    const r = await sweep(Date.now() + TTL_MINUTES * 60_000 + 1000)
    expect(r.voices).toBeGreaterThanOrEqual(2)
    expect(await avatarOf(a.voice_id)).toBeUndefined()
    expect(await avatarOf(b.voice_id)).toBeUndefined()
    const [left] = await srv.sql<[{ demo: number; tokens: number }]>`
      select (select count(*)::int from voice_avatars where tenant_id is null) as demo,
             (select count(*)::int from demo_voices) as tokens`
    expect(left).toEqual({ demo: 0, tokens: 0 })
    expect(await clips()).toBe(0)
    expect(existsSync(sampleFile(own))).toBe(false)
    expect(existsSync(sampleFile(shared))).toBe(true)
    expect((await preview({ voice_id: a.voice_id })).status).toBe(404)
    // The workspace's own voice is untouched.
    const [mine] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from voice_avatars where tenant_id = ${owner.tenantId} and deleted_at is null`
    expect(mine.n).toBe(2)
  })
})
