// POST /api/voice-avatars/clone through the real server: WAV and MP3 samples made here, samples
// kept by content hash, the 422s (not audio by its bytes, too short, no name, no file), 413 past
// the upload limit mid-stream, and preview-opening speaking with a workflow's cloned voice.
import { createHash } from "node:crypto"
import { existsSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { rawRequest } from "../support/raw-http.js"
import { mp3, postClone, wav } from "./fixtures.js"

const UPLOAD_LIMIT = 1_000_000

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session
beforeAll(async () => {
  srv = await startTestServer({ env: { UPLOAD_LIMIT_BYTES: String(UPLOAD_LIMIT) } })
  a = api(srv)
  s = await a.signup({ country: "US" })
})
afterAll(async () => srv?.stop())

interface VoiceBody {
  id: number
  name: string
  provider: string
  provider_voice_id: string | null
  format: string
  duration_ms: number
  sample_sha256: string
  sample_bytes: number
  params: { gender: string; pitch: number; speed: number; method: string; pitch_hz: number | null }
}

const errorOf = async (res: Response) => ({
  status: res.status,
  ...((await res.json()) as { code: string; field?: string; error: string }),
})
const sampleDir = () => join(srv.config.dataDir, "voice-samples")
const sampleFiles = () => (existsSync(sampleDir()) ? readdirSync(sampleDir()).sort() : [])
const rowCount = async () => (await srv.sql<[{ n: number }]>`select count(*)::int as n from voice_avatars`)[0].n
const asWav = (bytes: Buffer, filename = "me.wav") => ({ bytes, filename, type: "audio/wav" })

async function cloned(res: Response): Promise<VoiceBody> {
  if (res.status !== 201) throw new Error(`clone ${res.status}: ${await res.text()}`)
  return (await res.json()) as VoiceBody
}

describe("cloning", () => {
  it("a WAV: 201, its voice measured from the audio, the sample kept under its content hash", async () => {
    const bytes = wav({ hz: 115, seconds: 7 })
    const v = await cloned(await postClone(srv.url, s.token, { name: "  Dev's voice ", sample: asWav(bytes) }))
    const sha = createHash("sha256").update(bytes).digest("hex")
    expect(v).toMatchObject({
      name: "Dev's voice",
      provider: "sim",
      provider_voice_id: null,
      format: "wav",
      duration_ms: 7000,
      sample_sha256: sha,
      sample_bytes: bytes.length,
      params: { gender: "male", method: "pcm" },
    })
    expect(v.params.pitch_hz).toBeCloseTo(115, -1)
    expect(sampleFiles()).toContain(`${sha}.wav`)
    const [row] = await srv.sql`
      select tenant_id, sample_path, deleted_at, expires_at from voice_avatars where id = ${v.id}`
    expect(row).toEqual({
      tenant_id: s.tenantId,
      sample_path: `voice-samples/${sha}.wav`,
      deleted_at: null,
      expires_at: null,
    })
  })

  it("an MP3 made with lamejs: detected from its bytes whatever it is called, its duration read", async () => {
    const bytes = mp3({ hz: 210, seconds: 6 })
    const v = await cloned(
      await postClone(srv.url, s.token, {
        name: "Mp3",
        sample: { bytes, filename: "recording.bin", type: "application/octet-stream" },
      }),
    )
    expect(v).toMatchObject({ format: "mp3", params: { method: "metadata", pitch_hz: null } })
    // MP3 frames pad the end: within a frame or two of six seconds.
    expect(Math.abs(v.duration_ms - 6000)).toBeLessThan(120)
    expect(sampleFiles()).toContain(`${v.sample_sha256}.mp3`)
  })

  it("the same recording twice: two voices, one file", async () => {
    const bytes = wav({ hz: 130, seconds: 5.5 })
    const before = sampleFiles().length
    const one = await cloned(await postClone(srv.url, s.token, { name: "One", sample: asWav(bytes) }))
    const two = await cloned(await postClone(srv.url, s.token, { name: "Two", sample: asWav(bytes) }))
    expect(two.id).not.toBe(one.id)
    expect(two.sample_sha256).toBe(one.sample_sha256)
    expect(sampleFiles().length).toBe(before + 1)
    expect(sampleFiles().filter((f) => f.startsWith(".incoming"))).toEqual([])
  })
})

describe("refused samples: 422 on the field, nothing kept", () => {
  const refused = async (res: Response, field: string, says: RegExp) => {
    const err = await errorOf(res)
    expect(err).toMatchObject({ status: 422, code: "VALIDATION_FAILED", field })
    expect(err.error).toMatch(says)
  }

  it("a text file renamed .wav", async () => {
    const [files, rows] = [sampleFiles(), await rowCount()]
    const text = Buffer.from("This is not audio at all.\n".repeat(4000))
    await refused(
      await postClone(srv.url, s.token, { name: "Fake", sample: asWav(text, "voice.wav") }),
      "sample",
      /not a WAV, MP3, OGG or WebM/,
    )
    expect([sampleFiles(), await rowCount()]).toEqual([files, rows])
  })

  it("a one-second clip, and one over five minutes", async () => {
    const [files, rows] = [sampleFiles(), await rowCount()]
    await refused(
      await postClone(srv.url, s.token, { name: "Short", sample: asWav(wav({ hz: 200, seconds: 1 })) }),
      "sample",
      /is 1\.0 s long; a sample must be 5 s to 5 min/,
    )
    // Five minutes of audio would pass the upload limit: a WAV whose header declares 301 s.
    const long = wav({ hz: 200, seconds: 1, sampleRate: 8000 })
    long.writeUInt32LE(8000 * 2 * 301, 40)
    long.writeUInt32LE(36 + 8000 * 2 * 301, 4)
    await refused(await postClone(srv.url, s.token, { name: "Long", sample: asWav(long) }), "sample", /5 s to 5 min/)
    expect([sampleFiles(), await rowCount()]).toEqual([files, rows])
  })

  it("no name, a name too long, no file, or the file in another field", async () => {
    const rows = await rowCount()
    const sample = asWav(wav({ hz: 200, seconds: 5 }))
    await refused(await postClone(srv.url, s.token, { sample }), "name", /required/)
    await refused(await postClone(srv.url, s.token, { name: "   ", sample }), "name", /required/)
    await refused(await postClone(srv.url, s.token, { name: "x".repeat(101), sample }), "name", /at most 100/)
    await refused(await postClone(srv.url, s.token, { name: "No file" }), "sample", /required/)
    await refused(
      await postClone(srv.url, s.token, { name: "Wrong", sample, field: "audio" }),
      "sample",
      /form field "audio"/,
    )
    expect(await rowCount()).toBe(rows)
    expect(sampleFiles().filter((f) => f.startsWith(".incoming"))).toEqual([])
  })

  it("JSON instead of a form: 415", async () => {
    const res = await a.call("POST", "/api/voice-avatars/clone", { token: s.token, body: { name: "x" } })
    expect(await errorOf(res)).toMatchObject({ status: 415, code: "UNSUPPORTED_MEDIA_TYPE" })
  })
})

describe("past the upload limit", () => {
  it("mid-stream (chunked, no length declared): 413, nothing kept", async () => {
    const [files, rows] = [sampleFiles(), await rowCount()]
    const head =
      `POST /api/voice-avatars/clone HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${s.token}\r\n` +
      "Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n"
    const piece = (data: Buffer | string) => {
      const bytes = typeof data === "string" ? Buffer.from(data) : data
      return Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from("\r\n")])
    }
    const audio = wav({ hz: 150, seconds: 30 }) // 1.3 MB, past the 1 MB limit
    const pieces: Array<string | Buffer> = [
      head,
      piece('--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nBig\r\n'),
      piece(
        '--b\r\nContent-Disposition: form-data; name="sample"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n',
      ),
    ]
    for (let at = 0; at < audio.length; at += 64 * 1024) pieces.push(piece(audio.subarray(at, at + 64 * 1024)))
    pieces.push(piece("\r\n--b--\r\n"), "0\r\n\r\n")
    const res = await rawRequest(srv.port, pieces, { timeoutMs: 10_000 })
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" })
    for (let i = 0; i < 50 && sampleFiles().some((f) => f.startsWith(".incoming")); i++)
      await new Promise((r) => setTimeout(r, 20))
    expect([sampleFiles(), await rowCount()]).toEqual([files, rows])
  })

  it("declared up front: 413 before anything is read", async () => {
    const res = await postClone(srv.url, s.token, { name: "Big", sample: asWav(wav({ hz: 150, seconds: 30 })) })
    expect(await errorOf(res)).toMatchObject({ status: 413, code: "PAYLOAD_TOO_LARGE" })
  })
})

describe("preview-opening with a workflow's cloned voice", () => {
  const text = "Hi, this is a quick call from Summit Energy about your plan."
  let workflow: number
  let voice: VoiceBody

  beforeAll(async () => {
    const [w] = await srv.sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt)
      values (${s.tenantId}, 'Campaign', 'anya', 'Call people about the plan') returning id`
    workflow = w.id
    voice = await cloned(
      await postClone(srv.url, s.token, { name: "Mine", sample: asWav(wav({ hz: 205, seconds: 6 })) }),
    )
  })

  /** token null: no credential at all. */
  const preview = async (body: Record<string, unknown>, token: string | null = s.token) => {
    const res = await a.call("POST", "/api/workflows/preview-opening", {
      ...(token !== null && { token }),
      body: { text, ...body },
    })
    if (res.status !== 200) return { status: res.status, body: await res.json() }
    const clip = (await res.json()) as { clip_id: string; voice_id: number | null; persona: string; mp3_url: string }
    const audio = Buffer.from(await (await fetch(clip.mp3_url)).arrayBuffer())
    return { status: 200, clip, audio }
  }

  it("speaks in the assigned clone, audibly not the persona; cleared, it is the persona again", async () => {
    const persona = await preview({ persona: "anya" })
    const before = await preview({ workflow_id: workflow })
    expect(before.clip).toMatchObject({ persona: "anya", voice_id: null, clip_id: persona.clip!.clip_id })

    const assign = (voice_id: number | null) =>
      a.call("PUT", "/api/voice-avatars/assign", { token: s.token, body: { workflow_id: workflow, voice_id } })
    expect((await assign(voice.id)).status).toBe(200)
    const spoken = await preview({ workflow_id: workflow })
    expect(spoken.clip).toMatchObject({ persona: "anya", voice_id: voice.id })
    expect(spoken.audio!.length).toBeGreaterThan(1000)
    expect(spoken.audio!.subarray(0, 2)).toEqual(persona.audio!.subarray(0, 2)) // both MP3 frames
    expect(spoken.audio!.equals(persona.audio!)).toBe(false)
    const [clipRow] = await srv.sql`select voice_avatar_id from speech_clips where id = ${spoken.clip!.clip_id}`
    expect(clipRow).toEqual({ voice_avatar_id: voice.id })

    // Another persona's language, the same clone.
    const inPriya = await preview({ workflow_id: workflow, persona: "priya" })
    expect(inPriya.clip).toMatchObject({ persona: "priya", voice_id: voice.id })

    expect((await assign(null)).status).toBe(200)
    const after = await preview({ workflow_id: workflow })
    expect(after.clip).toMatchObject({ voice_id: null, clip_id: persona.clip!.clip_id })
  })

  it("someone else's workflow, or no sign-in, is 404; neither persona nor workflow is 422", async () => {
    const other = await a.signup({ country: "US" })
    expect(await preview({ workflow_id: workflow }, other.token)).toMatchObject({
      status: 404,
      body: { code: "NOT_FOUND" },
    })
    expect(await preview({ workflow_id: workflow }, null)).toMatchObject({ status: 404 })
    expect(await preview({})).toMatchObject({ status: 422, body: { field: "persona" } })
  })
})
