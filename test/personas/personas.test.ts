// /api/personas through the real server: the seven built-ins beside the workspace's own, create and
// edit with the free-form body (known fields checked, the rest kept as attributes), the 422s,
// read-only built-ins, scopes (read key cannot create, only admin deletes) and workspace isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { VOICES } from "../../src/voices/voices.catalog.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { postClone, wav } from "../voices/fixtures.js"

let srv: TestServer
let a: ReturnType<typeof api>
let s: Session
beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
  s = await a.signup({ country: "IN" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, who: { token: string } | undefined, body?: unknown) => {
  const res = await a.call(method, path, {
    ...(who !== undefined && { token: who.token }),
    ...(body !== undefined && { body }),
  })
  return { status: res.status, body: (await res.json()) as Json }
}
const create = async (body: unknown, who: { token: string } = s) => {
  const res = await call("POST", "/api/personas", who, body)
  if (res.status !== 201) throw new Error(`create ${res.status}: ${JSON.stringify(res.body)}`)
  return res.body
}
const list = async (who: { token: string } = s) => (await call("GET", "/api/personas", who)).body.personas as Json[]

describe("listing", () => {
  it("lists the seven catalogue personas first (read-only, in catalogue order), then the workspace's", async () => {
    const mine = await create({ name: "Asha", voice: "priya" })
    const all = await list()
    const builtins = all.filter((p) => p.builtin)
    expect(builtins.map((p) => p.voice)).toEqual(VOICES.map((v) => v.id))
    const priya = builtins.find((p) => p.voice === "priya")!
    expect(priya).toMatchObject({
      builtin: true,
      name: "Priya",
      language: "en-IN",
      agent_name: "Priya",
      greeting: null,
      style: ["bright", "polite"],
      attributes: { gender: "female", accent: "Indian English" },
      workflow_ids: [],
    })
    expect(Number.isInteger(priya.id)).toBe(true)
    expect(all.at(-1)).toMatchObject({ id: mine.id, builtin: false, name: "Asha" })
    // Every workspace sees the same built-in ids.
    const other = await a.signup({ country: "US" })
    expect((await list(other)).filter((p) => p.builtin).map((p) => p.id)).toEqual(builtins.map((p) => p.id))
  })
})

describe("creating", () => {
  it("keeps the fields Parley uses, and every other field as attributes", async () => {
    const p = await create({
      name: "  Ravi  ",
      language: "en-in",
      voice: "rohan",
      style: "warm, upbeat ,  direct",
      greeting: "Hi {name}, {agent_name} here from {company}.",
      agent_name: "Ravi",
      speaking_rate: 1.1,
      industry: "lending",
      script_notes: { avoid: ["jargon"] },
      attributes: { region: "south" },
      id: 999_999,
      builtin: true,
    })
    expect(p).toMatchObject({
      builtin: false,
      name: "Ravi",
      language: "en-IN",
      voice: "rohan",
      style: ["warm", "upbeat", "direct"],
      greeting: "Hi {name}, {agent_name} here from {company}.",
      agent_name: "Ravi",
      speaking_rate: 1.1,
      attributes: { industry: "lending", script_notes: { avoid: ["jargon"] }, region: "south" },
      workflow_ids: [],
    })
    expect(p.id).not.toBe(999_999)
    const [row] = await srv.sql`select tenant_id, attributes, style from personas where id = ${p.id}`
    expect(row).toEqual({
      tenant_id: s.tenantId,
      attributes: { industry: "lending", script_notes: { avoid: ["jargon"] }, region: "south" },
      style: ["warm", "upbeat", "direct"],
    })
  })

  it("takes its language from a catalogue voice, and speaks with one of the workspace's cloned voices", async () => {
    expect(await create({ name: "Hindi desk", voice: "meera" })).toMatchObject({ language: "hi-IN", voice: "meera" })
    const res = await postClone(srv.url, s.token, {
      name: "Founder",
      sample: { bytes: wav({ hz: 140, seconds: 6 }), filename: "me.wav", type: "audio/wav" },
    })
    expect(res.status).toBe(201)
    const voice = (await res.json()) as { id: number }
    const p = await create({ name: "Founder", language: "en-IN", voice: voice.id, style: ["calm"] })
    expect(p).toMatchObject({ voice: voice.id, language: "en-IN", style: ["calm"] })
    const [row] = await srv.sql`select voice, voice_avatar_id from personas where id = ${p.id}`
    expect(row).toEqual({ voice: null, voice_avatar_id: voice.id })
  })

  const refused = async (body: unknown, field: string, says?: RegExp) => {
    const before = (await list()).length
    const res = await call("POST", "/api/personas", s, body)
    expect(res.status, JSON.stringify(res.body)).toBe(422)
    expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", field })
    if (says !== undefined) expect(JSON.stringify(res.body)).toMatch(says)
    expect((await list()).length).toBe(before)
  }

  it("refuses a body without a good name", async () => {
    await refused({ language: "en-IN" }, "name")
    await refused({ name: "   ", language: "en-IN" }, "name")
    await refused({ name: "x".repeat(101), language: "en-IN" }, "name")
    await refused([{ name: "Array" }], "body")
  })

  it("refuses a language that is not BCP 47, and a missing one without a catalogue voice", async () => {
    await refused({ name: "L", language: "en_US" }, "language", /BCP 47/)
    await refused({ name: "L", language: "not a tag" }, "language", /BCP 47/)
    await refused({ name: "L", language: 7 }, "language")
    await refused({ name: "L" }, "language", /required unless voice is a catalogue voice/)
  })

  it("refuses a voice that is neither a catalogue voice nor this workspace's cloned voice", async () => {
    await refused({ name: "V", language: "en-IN", voice: "nobody" }, "voice", /catalogue voice/)
    await refused({ name: "V", language: "en-IN", voice: 987_654 }, "voice", /not one of this workspace's voices/)
    await refused({ name: "V", language: "en-US", voice: "meera" }, "voice", /speaks hi-IN/)
  })

  it("refuses bad style, greeting, agent_name and speaking_rate", async () => {
    const base = { name: "F", language: "en-IN" }
    await refused({ ...base, style: 5 }, "style", /tone words/)
    await refused({ ...base, style: Array.from({ length: 11 }, (_, i) => `w${i}`) }, "style", /at most 10/)
    await refused({ ...base, style: ["x".repeat(41)] }, "style.0")
    await refused({ ...base, greeting: "Hi {name}, the price is {price}." }, "greeting", /\{price\}/)
    await refused({ ...base, greeting: "x".repeat(501) }, "greeting")
    await refused({ ...base, agent_name: "x".repeat(61) }, "agent_name")
    await refused({ ...base, speaking_rate: 2.5 }, "speaking_rate")
    await refused({ ...base, speaking_rate: 0.4 }, "speaking_rate")
    await refused({ ...base, speaking_rate: "fast" }, "speaking_rate")
  })

  it("bounds the attributes: at most 50 fields and 8 KB", async () => {
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`f${i}`, i]))
    await refused({ name: "A", language: "en-IN", ...many }, "attributes", /at most 50 fields/)
    await refused({ name: "A", language: "en-IN", notes: "x".repeat(9000) }, "attributes", /8192 bytes/)
    await refused({ name: "A", language: "en-IN", attributes: "not an object" }, "attributes")
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`f${i}`, i]))
    expect(Object.keys((await create({ name: "A", language: "en-IN", ...fifty })).attributes)).toHaveLength(50)
  })
})

describe("editing", () => {
  it("replaces the fields sent, clears with null, merges attributes (null removes one)", async () => {
    const p = await create({
      name: "Edit me",
      voice: "kai",
      agent_name: "Kai",
      greeting: "Hello {name}.",
      speaking_rate: 1.2,
      team: "north",
      tier: "gold",
    })
    const res = await call("PUT", `/api/personas/${p.id}`, s, {
      greeting: "Hey {name}, it's {agent_name}.",
      agent_name: null,
      speaking_rate: null,
      tier: null,
      shift: "evening",
    })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body).toMatchObject({
      id: p.id,
      name: "Edit me",
      language: "en-US",
      voice: "kai",
      greeting: "Hey {name}, it's {agent_name}.",
      agent_name: null,
      speaking_rate: null,
      attributes: { team: "north", shift: "evening" },
    })
    expect(res.body.attributes).not.toHaveProperty("tier")
    expect(Date.parse(res.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(p.updated_at))
  })

  it("checks a new language against its catalogue voice, and the fields as on create", async () => {
    const p = await create({ name: "Lang", voice: "anya" })
    expect((await call("PUT", `/api/personas/${p.id}`, s, { language: "hi-IN" })).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "voice",
    })
    expect((await call("PUT", `/api/personas/${p.id}`, s, { name: "" })).status).toBe(422)
    const ok = await call("PUT", `/api/personas/${p.id}`, s, { language: "hi-IN", voice: "meera" })
    expect(ok.body).toMatchObject({ language: "hi-IN", voice: "meera" })
    expect((await call("PUT", `/api/personas/${p.id}`, s, { voice: null })).body.voice).toBeNull()
  })

  it("keeps built-ins read-only (409), and answers 404 for an unknown persona", async () => {
    const builtin = (await list()).find((p) => p.builtin)!
    const put = await call("PUT", `/api/personas/${builtin.id}`, s, { name: "Mine now" })
    expect(put.status).toBe(409)
    expect(put.body.code).toBe("CONFLICT")
    expect((await call("DELETE", `/api/personas/${builtin.id}`, s)).status).toBe(409)
    expect((await list()).find((p) => p.id === builtin.id)).toMatchObject({ name: builtin.name })
    expect((await call("PUT", "/api/personas/987654", s, { name: "x" })).status).toBe(404)
    expect((await call("DELETE", "/api/personas/987654", s)).status).toBe(404)
  })
})

describe("deleting", () => {
  it("removes it from the list; a second delete is 404", async () => {
    const p = await create({ name: "Short-lived", voice: "leo" })
    const res = await call("DELETE", `/api/personas/${p.id}`, s)
    expect(res).toEqual({ status: 200, body: { id: p.id, deleted: true, reassigned: [] } })
    expect((await list()).some((x) => x.id === p.id)).toBe(false)
    const [row] = await srv.sql`select deleted_at is not null as gone from personas where id = ${p.id}`
    expect(row).toEqual({ gone: true })
    expect((await call("DELETE", `/api/personas/${p.id}`, s)).status).toBe(404)
    expect((await call("PUT", `/api/personas/${p.id}`, s, { name: "Back" })).status).toBe(404)
  })
})

describe("scopes and isolation", () => {
  it("a read key lists but cannot create; a write key creates and edits but cannot delete; admin deletes", async () => {
    const read = { token: (await a.createKey(s, { name: "reader", scope: "read" })).secret }
    const write = { token: (await a.createKey(s, { name: "writer", scope: "write" })).secret }
    const admin = { token: (await a.createKey(s, { name: "admin", scope: "admin" })).secret }
    expect((await call("GET", "/api/personas", read)).status).toBe(200)
    const denied = await call("POST", "/api/personas", read, { name: "Nope", voice: "kai" })
    expect(denied.status).toBe(403)
    const p = await create({ name: "By key", voice: "kai" }, write)
    expect((await call("PUT", `/api/personas/${p.id}`, read, { name: "x" })).status).toBe(403)
    expect((await call("PUT", `/api/personas/${p.id}`, write, { name: "Renamed" })).status).toBe(200)
    expect((await call("DELETE", `/api/personas/${p.id}`, write)).status).toBe(403)
    expect((await call("DELETE", `/api/personas/${p.id}`, admin)).status).toBe(200)
    expect((await call("GET", "/api/personas", undefined)).status).toBe(401)
  })

  it("another workspace's persona is not listed, and is 404 to edit, delete or assign", async () => {
    const p = await create({ name: "Private", voice: "priya" })
    const other = await a.signup({ country: "IN" })
    expect((await list(other)).some((x) => x.id === p.id)).toBe(false)
    expect((await call("PUT", `/api/personas/${p.id}`, other, { name: "Stolen" })).status).toBe(404)
    expect((await call("DELETE", `/api/personas/${p.id}`, other)).status).toBe(404)
    const w = (await call("POST", "/api/workflows", other, { nl_prompt: "Remind customers about renewals." })).body
    const assign = await call("PUT", "/api/personas/assign", other, { workflow_id: w.id, persona_id: p.id })
    expect(assign.status).toBe(404)
    // Nor can a workspace reach another's cloned voice through a persona.
    const [v] = await srv.sql<[{ id: number }?]>`select id from voice_avatars where tenant_id = ${s.tenantId} limit 1`
    if (v !== undefined)
      expect((await call("POST", "/api/personas", other, { name: "V", language: "en-IN", voice: v.id })).status).toBe(
        422,
      )
    expect((await list()).find((x) => x.id === p.id)).toMatchObject({ name: "Private" })
  })
})

describe("GET /api/sim/personas", () => {
  it("lists one simulated callee per behaviour with the digits that select it (read scope)", async () => {
    const read = { token: (await a.createKey(s, { name: "sim reader", scope: "read" })).secret }
    const res = await call("GET", "/api/sim/personas", read)
    expect(res.status).toBe(200)
    const personas = res.body.personas as Json[]
    expect(personas.map((p) => [p.behaviour, p.suffix, p.digits])).toEqual([
      ["no_answer", "0", [0]],
      ["busy", "1", [1]],
      ["voicemail", "2", [2]],
      ["agrees", "3", [3, 4, 5]],
      ["declines", "6", [6]],
      ["wants_discount", "7", [7]],
      ["wants_callback", "8", [8]],
      ["wants_human", "9", [9]],
    ])
    for (const p of personas) {
      expect(p.id).toMatch(/^[a-z-]+$/)
      expect(p.name.length).toBeGreaterThan(0)
      expect(p.description.length).toBeGreaterThan(10)
    }
    expect((await call("GET", "/api/sim/personas", undefined)).status).toBe(401)
  })
})

describe("OpenAPI", () => {
  it("documents every persona route", async () => {
    const doc = (await call("GET", "/openapi.json", undefined)).body
    expect(Object.keys(doc.paths["/api/personas"])).toEqual(expect.arrayContaining(["get", "post"]))
    expect(Object.keys(doc.paths["/api/personas/{persona_id}"])).toEqual(expect.arrayContaining(["put", "delete"]))
    expect(Object.keys(doc.paths["/api/personas/assign"])).toContain("put")
    expect(Object.keys(doc.paths["/api/sim/personas"])).toContain("get")
  })
})
