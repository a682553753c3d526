// The first public endpoints through the real server: /healthz, /pricing, /voices (with samples
// that really are MP3), /api/objections and /openapi.json.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { realServices, sharedTestServer, startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
beforeAll(async () => {
  srv = await sharedTestServer()
})
afterAll(async () => srv?.stop())

const getJson = async <T = Record<string, unknown>>(
  path: string,
): Promise<{ status: number; body: T; res: Response }> => {
  const res = await fetch(srv.url + path)
  return { status: res.status, body: (await res.json()) as T, res }
}

describe("GET /healthz", () => {
  it("reports the database, the bus, a runtime process and the providers", async () => {
    const { status, body } = await getJson<any>("/healthz")
    expect(status).toBe(200)
    expect(body.status).toBe("ok")
    expect(body.version).toBe("0.3.0")
    expect(body.checks.database).toMatchObject({ ok: true, kind: realServices ? "postgres" : "pglite" })
    expect(body.checks.database.latency_ms).toBeGreaterThanOrEqual(0)
    expect(body.checks.bus).toMatchObject({ ok: true, kind: process.env.NATS_URL ? "nats" : "memory" })
    expect(body.checks.runtime).toEqual({ ok: true, answered_by: srv.running.instance.id })
    for (const kind of ["telephony", "llm", "speech", "payments", "mail"])
      expect(body.providers[kind]).toMatchObject({ mode: "simulator", configured: true })
    // The harness asks for the stub gateway and configures no real one.
    expect(body.payments).toEqual({ mode: "stub", gw_card: false, gw_upi: false })
    // Where the bus lives is nobody's business but the operator's.
    expect(body.checks.bus.server).toBeUndefined()
    expect(JSON.stringify(body)).not.toMatch(/nats:\/\/|4222/)
  })

  it("reports the gateways mode when the stub was not asked for", async () => {
    const other = await startTestServer({ env: { PAYMENTS: "gateways" } })
    try {
      const body = (await (await fetch(`${other.url}/healthz`)).json()) as any
      expect(body.payments).toEqual({ mode: "gateways", gw_card: false, gw_upi: false })
    } finally {
      await other.stop()
    }
  })

  it("says unavailable with 503 once the database is gone, with a code and no error text", async () => {
    const other = await startTestServer()
    try {
      // Gracefully: a connection still in its handshake finishes it (postgres.js rejects its type
      // lookup unhandled when destroyed mid-handshake), then every connection closes.
      await other.sql.end({ timeout: 5 })
      const res = await fetch(`${other.url}/healthz`)
      expect(res.status).toBe(503)
      const body = (await res.json()) as any
      expect(body.status).toBe("unavailable")
      expect(body.checks.database).toEqual({
        ok: false,
        kind: realServices ? "postgres" : "pglite",
        code: "DATABASE_UNREACHABLE",
      })
      // The driver's message (which can name hosts and ports) is logged, not answered.
      expect(body.checks.database.error).toBeUndefined()
    } finally {
      await other.stop()
    }
  })
})

describe("GET /pricing", () => {
  const currencyKeyed = (v: unknown) => expect(Object.keys(v as object).sort()).toEqual(["INR", "USD"])

  it("has every path of the spec, currency-keyed", async () => {
    const { status, body: p } = await getJson<any>("/pricing")
    expect(status).toBe(200)
    for (const v of [
      p.plans.byok.fee_minor,
      p.plans.all_inclusive.rate_per_minute_minor,
      p.trial_credit_minor,
      p.topup.minimum_minor,
    ]) {
      currencyKeyed(v)
      expect(Number.isInteger(v.INR) && v.INR > 0).toBe(true)
      expect(Number.isInteger(v.USD) && v.USD > 0).toBe(true)
    }
    for (const v of [
      p.plans.byok.fee_display,
      p.plans.all_inclusive.rate_per_minute_display,
      p.trial_credit_display,
      p.examples.max_utilisation_cost_display,
    ]) {
      currencyKeyed(v)
      expect(v.INR).toMatch(/^₹[\d,]+\.\d{2}$/)
      expect(v.USD).toMatch(/^\$[\d,]+\.\d{2}$/)
    }
    expect(Number.isInteger(p.examples.max_utilisation_hours_per_month)).toBe(true)
    expect(p.examples.max_utilisation_minutes).toBe(p.examples.max_utilisation_hours_per_month * 60)
  })

  it("displays what the minor units say", async () => {
    const { body: p } = await getJson<any>("/pricing")
    const rate = p.plans.all_inclusive.rate_per_minute_minor
    expect(p.plans.all_inclusive.rate_per_minute_display.USD).toBe(`$${(rate.USD / 100).toFixed(2)}`)
    const cost = p.examples.max_utilisation_minutes * rate.USD
    expect(p.examples.max_utilisation_cost_display.USD).toBe(
      `$${(cost / 100).toLocaleString("en-US", { minimumFractionDigits: 2 })}`,
    )
  })
})

/** Walks MP3 frames from the first sync word; returns how many chained back to back. */
function mp3Frames(buf: Uint8Array): number {
  const BITRATES = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
  const RATES: Record<number, number[]> = {
    3: [44100, 48000, 32000],
    2: [22050, 24000, 16000],
    0: [11025, 12000, 8000],
  }
  let i = 0
  while (i < buf.length - 1 && !(buf[i] === 0xff && (buf[i + 1]! & 0xe0) === 0xe0)) i++
  let frames = 0
  while (i + 4 <= buf.length) {
    if (buf[i] !== 0xff || (buf[i + 1]! & 0xe0) !== 0xe0) break
    const version = (buf[i + 1]! >> 3) & 3
    const layer = (buf[i + 1]! >> 1) & 3
    const bitrate = (version === 3 ? [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320] : BITRATES)[
      (buf[i + 2]! >> 4) & 15
    ]
    const rate = RATES[version]?.[(buf[i + 2]! >> 2) & 3]
    if (layer !== 1 || !bitrate || !rate) break
    const padding = (buf[i + 2]! >> 1) & 1
    i += Math.floor(((version === 3 ? 144 : 72) * bitrate * 1000) / rate) + padding
    frames++
  }
  return frames
}

describe("GET /voices", () => {
  it("lists 6 English personas and 1 Hindi, each with a sample URL", async () => {
    const { status, body } = await getJson<{ voices: Array<Record<string, string>> }>("/voices")
    expect(status).toBe(200)
    const ids = body.voices.map((v) => v.id)
    expect(ids).toEqual(expect.arrayContaining(["amelia", "rohan", "kai", "anya", "leo", "priya"]))
    expect(body.voices).toHaveLength(7)
    expect(body.voices.filter((v) => v.language!.startsWith("en-"))).toHaveLength(6)
    expect(body.voices.filter((v) => v.language === "hi-IN")).toHaveLength(1)
    for (const v of body.voices) expect(v.sample_mp3_url).toBe(`${srv.url}/voices/${v.id}/sample.mp3`)
  })

  it("serves each sample as playable MP3", async () => {
    const { body } = await getJson<{ voices: Array<{ id: string; sample_mp3_url: string }> }>("/voices")
    const sizes = new Set<number>()
    for (const v of body.voices) {
      const res = await fetch(v.sample_mp3_url)
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toBe("audio/mpeg")
      const audio = new Uint8Array(await res.arrayBuffer())
      // A second of audio at any MPEG rate is more than 30 frames, all chained to the end.
      expect(mp3Frames(audio)).toBeGreaterThan(30)
      expect(Number(res.headers.get("x-duration-ms"))).toBeGreaterThan(1000)
      sizes.add(audio.length)
    }
    expect(sizes.size).toBeGreaterThan(1)
  }, 120_000)

  it("answers an unknown voice with 404 and a malformed id with 422", async () => {
    const res = await fetch(`${srv.url}/voices/nobody/sample.mp3`)
    expect(res.status).toBe(404)
    expect(await res.json()).toMatchObject({ code: "NOT_FOUND" })
    const bad = await fetch(`${srv.url}/voices/Bad%20Id/sample.mp3`)
    expect(bad.status).toBe(422)
    expect(await bad.json()).toMatchObject({ code: "VALIDATION_FAILED", field: "voice_id" })
  })
})

describe("GET /api/objections", () => {
  it("lists the seeded global library with use counts", async () => {
    const { status, body } = await getJson<{ objections: Array<Record<string, unknown>> }>("/api/objections")
    expect(status).toBe(200)
    expect(body.objections.length).toBeGreaterThanOrEqual(10)
    for (const o of body.objections) {
      expect(Object.keys(o).sort()).toEqual(["category", "id", "rebuttal_template", "trigger_text", "use_count"])
      expect(Number.isInteger(o.id)).toBe(true)
      expect(o.use_count).toBe(0)
    }
    const [{ count }] = await srv.sql<[{ count: number }]>`select count(*)::int as count from objections`
    expect(body.objections).toHaveLength(count)
  })

  it("reflects use_count from the database", async () => {
    await srv.sql`update objections set use_count = 5 where id = 1`
    const { body } = await getJson<{ objections: Array<{ id: number; use_count: number }> }>("/api/objections")
    expect(body.objections.find((o) => o.id === 1)!.use_count).toBe(5)
  })

  it("filters by category and fetches one by id", async () => {
    const { body } = await getJson<{ objections: Array<{ category: string }> }>("/api/objections?category=price")
    expect(body.objections.length).toBeGreaterThan(0)
    expect(body.objections.every((o) => o.category === "price")).toBe(true)
    expect((await getJson("/api/objections?category=Bad-Cat")).status).toBe(422)
    const one = await getJson<{ id: number }>("/api/objections/2")
    expect(one.status).toBe(200)
    expect(one.body.id).toBe(2)
    expect((await getJson("/api/objections/999999")).body).toMatchObject({ code: "NOT_FOUND" })
    expect((await getJson("/api/objections/two")).body).toMatchObject({ code: "VALIDATION_FAILED", field: "id" })
  })
})

describe("GET /openapi.json", () => {
  it("describes every route of the table as OpenAPI 3.1, version 0.3.0", async () => {
    const { status, body } = await getJson<any>("/openapi.json")
    expect(status).toBe(200)
    expect(body.openapi).toBe("3.1.0")
    expect(body.info.version).toBe("0.3.0")
    for (const p of [
      "/healthz",
      "/pricing",
      "/voices",
      "/voices/{voice_id}/sample.mp3",
      "/api/objections",
      "/api/objections/{id}",
      "/openapi.json",
    ])
      expect(body.paths[p]?.get, p).toBeDefined()
    const one = body.paths["/api/objections/{id}"].get
    expect(one.parameters).toContainEqual(expect.objectContaining({ name: "id", in: "path", required: true }))
    expect(one.responses["422"]).toBeDefined()
    expect(body.paths["/api/objections"].get.parameters).toContainEqual(
      expect.objectContaining({ name: "category", in: "query", required: false }),
    )
    expect(body.servers).toContainEqual({ url: "/v1" })
  })
})
