// PUT /api/personas/assign through the real server: a workspace persona or a built-in made a
// workflow's, the rule book's language check (422), null → the geography default (audience
// country, else workspace country, and the book's language), live/retired workflows (409), and
// deleting a persona in use (409 while live, else its workflows fall back to their default).
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { postClone, wav } from "../voices/fixtures.js"

let srv: TestServer
let a: ReturnType<typeof api>
let india: Session
beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
  india = await a.signup({ country: "IN" })
})
afterAll(async () => srv?.stop())

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const call = async (method: string, path: string, who: { token: string }, body?: unknown) => {
  const res = await a.call(method, path, { token: who.token, ...(body !== undefined && { body }) })
  return { status: res.status, body: (await res.json()) as Json }
}

async function workflow(s: Session, phones: string[] = [], persona_override?: string): Promise<Json> {
  const w = await call("POST", "/api/workflows", s, {
    nl_prompt: "Call customers about their renewal and answer questions.",
    ...(persona_override !== undefined && { persona_override }),
  })
  expect(w.status).toBe(201)
  if (phones.length > 0) {
    const aud = await call("POST", `/api/workflows/${w.body.id}/audience`, s, {
      rows: phones.map((phone) => ({ phone })),
    })
    expect(aud.body.accepted).toBe(phones.length)
  }
  return w.body
}

const assign = (s: Session, workflow_id: number, persona_id: number | null) =>
  call("PUT", "/api/personas/assign", s, { workflow_id, persona_id })

const builtinId = async (s: Session, voice: string): Promise<number> =>
  ((await call("GET", "/api/personas", s)).body.personas as Json[]).find((p) => p.builtin && p.voice === voice)!.id

const personaOf = async (workflowId: number) =>
  (await srv.sql<[{ persona_id: number | null }]>`select persona_id from workflows where id = ${workflowId}`)[0]
    .persona_id

const indian = (n: number) => Array.from({ length: n }, (_, i) => `+9198765432${String(10 + i)}`)
const american = (n: number) => Array.from({ length: n }, (_, i) => `+1202555${String(1000 + i)}`)
const australian = (n: number) => Array.from({ length: n }, (_, i) => `+614123456${String(10 + i)}`)

describe("assigning a persona", () => {
  it("makes the workspace's persona the workflow's, and lists the workflow under it", async () => {
    const w = await workflow(india)
    const p = (await call("POST", "/api/personas", india, { name: "Asha", voice: "priya", agent_name: "Asha" })).body
    const res = await assign(india, w.id, p.id)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body).toMatchObject({
      workflow_id: w.id,
      persona_id: p.id,
      geography_default: false,
      persona: { id: p.id, name: "Asha", builtin: false },
    })
    expect(await personaOf(w.id)).toBe(p.id)
    const listed = ((await call("GET", "/api/personas", india)).body.personas as Json[]).find((x) => x.id === p.id)!
    expect(listed.workflow_ids).toEqual([w.id])
  })

  it("takes a built-in by its id", async () => {
    const w = await workflow(india)
    const rohan = await builtinId(india, "rohan")
    expect((await assign(india, w.id, rohan)).body).toMatchObject({ persona_id: rohan, persona: { builtin: true } })
    expect(await personaOf(w.id)).toBe(rohan)
  })

  it("refuses a persona of another language than the rule book's: 422 RULE_BOOK_INVALID, nothing changes", async () => {
    const w = await workflow(india)
    expect(w.rule_book.language).toBe("en-IN")
    const hindi = (await call("POST", "/api/personas", india, { name: "Hindi", voice: "meera" })).body
    const res = await assign(india, w.id, hindi.id)
    expect(res.status).toBe(422)
    expect(res.body).toMatchObject({ code: "RULE_BOOK_INVALID", field: "persona_id" })
    expect(res.body.error).toMatch(/language/)
    expect(await personaOf(w.id)).toBeNull()
    // A regional variant of the same language is the same language, as for the rule book's own persona.
    const us = (await call("POST", "/api/personas", india, { name: "US", voice: "kai" })).body
    expect((await assign(india, w.id, us.id)).status).toBe(200)
  })

  it("answers 404 for an unknown workflow or persona, 422 for a bad body", async () => {
    const w = await workflow(india)
    expect((await assign(india, 987_654, null)).status).toBe(404)
    expect((await assign(india, w.id, 987_654)).status).toBe(404)
    const bad = await call("PUT", "/api/personas/assign", india, { workflow_id: w.id })
    expect(bad).toMatchObject({ status: 422, body: { code: "VALIDATION_FAILED", field: "persona_id" } })
    expect((await call("PUT", "/api/personas/assign", india, { workflow_id: "x", persona_id: null })).status).toBe(422)
  })

  it("answers 409 for a live or retired workflow", async () => {
    const w = await workflow(india)
    const priya = await builtinId(india, "priya")
    await srv.sql`update workflows set status = 'live' where id = ${w.id}`
    expect((await assign(india, w.id, priya)).body.code).toBe("WORKFLOW_LIVE")
    expect((await assign(india, w.id, null)).status).toBe(409)
    await srv.sql`update workflows set status = 'retired' where id = ${w.id}`
    expect((await assign(india, w.id, priya)).body.code).toBe("WORKFLOW_RETIRED")
    expect(await personaOf(w.id)).toBeNull()
  })
})

describe("clearing: the geography default", () => {
  const cleared = async (s: Session, w: Json) => {
    const res = await assign(s, w.id, null)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.geography_default).toBe(true)
    expect(res.body.persona.builtin).toBe(true)
    expect(await personaOf(w.id)).toBe(res.body.persona_id)
    return res.body.persona.voice as string
  }

  it("an Indian audience hears an Indian persona (Indian English, or Hindi for a Hindi rule book)", async () => {
    const p = (await call("POST", "/api/personas", india, { name: "Temp", voice: "kai" })).body
    const w = await workflow(india, indian(3))
    await assign(india, w.id, p.id)
    expect(await cleared(india, w)).toBe("priya")
    const hindi = await workflow(india, indian(2), "meera")
    expect(await cleared(india, hindi)).toBe("meera")
  })

  it("follows the audience's dominant country over the workspace's", async () => {
    expect(await cleared(india, await workflow(india, [...american(3), ...indian(2)]))).toBe("anya")
    const us = await a.signup({ country: "US" })
    expect(await cleared(us, await workflow(us, indian(2)))).toBe("priya")
    expect(await cleared(us, await workflow(us, australian(2)))).toBe("leo")
  })

  it("without an audience, goes by the workspace's country; elsewhere, a neutral English voice", async () => {
    const us = await a.signup({ country: "US" })
    expect(await cleared(us, await workflow(us))).toBe("anya")
    expect(await cleared(india, await workflow(india))).toBe("priya")
    const uae = await a.signup({ country: "AE" })
    expect(await cleared(uae, await workflow(uae, ["+971501234567"]))).toBe("amelia")
  })

  it("speaks the rule book's language where the country's voices do not (a Hindi book, a US audience)", async () => {
    const us = await a.signup({ country: "US" })
    expect(await cleared(us, await workflow(us, american(2), "meera"))).toBe("meera")
  })
})

describe("deleting a persona in use", () => {
  it("is 409 WORKFLOW_LIVE while a live workflow speaks as it, and changes nothing", async () => {
    const p = (await call("POST", "/api/personas", india, { name: "Busy", voice: "priya" })).body
    const [live, draft] = [await workflow(india), await workflow(india)]
    await assign(india, live.id, p.id)
    await assign(india, draft.id, p.id)
    await srv.sql`update workflows set status = 'live' where id = ${live.id}`
    const res = await call("DELETE", `/api/personas/${p.id}`, india)
    expect(res.status).toBe(409)
    expect(res.body).toMatchObject({ code: "WORKFLOW_LIVE", workflow_ids: [live.id] })
    expect(await personaOf(draft.id)).toBe(p.id)
    // Editing it while it speaks for a live workflow is refused the same way.
    expect((await call("PUT", `/api/personas/${p.id}`, india, { greeting: "Hi {name}." })).body.code).toBe(
      "WORKFLOW_LIVE",
    )
    await srv.sql`update workflows set status = 'paused' where id = ${live.id}`
    const done = await call("DELETE", `/api/personas/${p.id}`, india)
    expect(done.status).toBe(200)
    const priya = await builtinId(india, "priya")
    expect(done.body.reassigned).toEqual([
      { workflow_id: live.id, persona_id: priya },
      { workflow_id: draft.id, persona_id: priya },
    ])
    expect([await personaOf(live.id), await personaOf(draft.id)]).toEqual([priya, priya])
  })

  it("an edit to another language is refused while a workflow of the old language uses it (422)", async () => {
    const p = (await call("POST", "/api/personas", india, { name: "Switch", language: "en-IN" })).body
    const w = await workflow(india)
    await assign(india, w.id, p.id)
    const res = await call("PUT", `/api/personas/${p.id}`, india, { language: "hi-IN" })
    expect(res).toMatchObject({ status: 422, body: { code: "RULE_BOOK_INVALID", field: "language" } })
    expect((await call("PUT", `/api/personas/${p.id}`, india, { language: "en-GB" })).status).toBe(200)
  })
})

describe("the persona's voice", () => {
  it("speaks the workflow's opening preview: its catalogue voice, or its cloned voice", async () => {
    const w = await workflow(india)
    const preview = async () => {
      const res = await call("POST", "/api/workflows/preview-opening", india, {
        text: "Hello there.",
        workflow_id: w.id,
      })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body
    }
    expect(await preview()).toMatchObject({ persona: w.rule_book.persona, voice_id: null })
    const kai = (await call("POST", "/api/personas", india, { name: "Kai desk", voice: "kai" })).body
    await assign(india, w.id, kai.id)
    expect(await preview()).toMatchObject({ persona: "kai", voice_id: null })
    const clone = await postClone(srv.url, india.token, {
      name: "Mine",
      sample: { bytes: wav({ hz: 180, seconds: 6 }), filename: "me.wav", type: "audio/wav" },
    })
    const voiceId = ((await clone.json()) as { id: number }).id
    const mine = (await call("POST", "/api/personas", india, { name: "Cloned", language: "en-IN", voice: voiceId }))
      .body
    await assign(india, w.id, mine.id)
    expect(await preview()).toMatchObject({ voice_id: voiceId })
  })
})

describe("isolation", () => {
  it("another workspace's workflow is 404, and its assignment is untouched", async () => {
    const w = await workflow(india)
    const other = await a.signup({ country: "IN" })
    const priya = await builtinId(other, "priya")
    expect((await assign(other, w.id, priya)).status).toBe(404)
    expect((await assign(other, w.id, null)).status).toBe(404)
    expect(await personaOf(w.id)).toBeNull()
  })
})
