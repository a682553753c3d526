// The cloned-voice endpoints' rules through the real server: listing, assigning to workflows and
// clearing, deleting (409 while a live workflow speaks with the voice), scopes (GET read, POST and
// PUT write, DELETE admin) and workspace isolation (another workspace's voice or workflow: 404).
import { existsSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"
import { postClone, wav } from "./fixtures.js"

let srv: TestServer
let a: ReturnType<typeof api>
beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
})
afterAll(async () => srv?.stop())

interface Listed {
  id: number
  name: string
  sample_sha256: string
  workflow_ids: number[]
}

const errorOf = async (res: Response) => ({ status: res.status, ...((await res.json()) as { code: string }) })

let pitch = 100
/** A new voice for `token` (each from a different recording). */
async function newVoice(token: string, name = "Voice"): Promise<{ id: number; sample_sha256: string }> {
  const sample = { bytes: wav({ hz: pitch++, seconds: 5 }), filename: "v.wav", type: "audio/wav" }
  const res = await postClone(srv.url, token, { name, sample })
  if (res.status !== 201) throw new Error(`clone ${res.status}: ${await res.text()}`)
  return (await res.json()) as { id: number; sample_sha256: string }
}

async function newWorkflow(tenantId: number, status = "draft"): Promise<number> {
  const [w] = await srv.sql<[{ id: number }]>`
    insert into workflows (tenant_id, name, persona, nl_prompt, status)
    values (${tenantId}, 'Campaign', 'amelia', 'Call people', ${status}) returning id`
  return w.id
}

const list = async (token: string) => {
  const res = await a.call("GET", "/api/voice-avatars", { token })
  expect(res.status).toBe(200)
  return ((await res.json()) as { voices: Listed[] }).voices
}
const assign = (token: string, workflow_id: number, voice_id: number | null) =>
  a.call("PUT", "/api/voice-avatars/assign", { token, body: { workflow_id, voice_id } })
const remove = (token: string, id: number | string) => a.call("DELETE", `/api/voice-avatars/${id}`, { token })
const assignedVoice = async (workflowId: number) =>
  (await srv.sql<[{ v: number | null }]>`select voice_avatar_id as v from workflows where id = ${workflowId}`)[0].v

describe("listing and assigning", () => {
  it("lists the workspace's voices newest first, each with the workflows it speaks for", async () => {
    const s = await a.signup()
    expect(await list(s.token)).toEqual([])
    const first = await newVoice(s.token, "First")
    const second = await newVoice(s.token, "Second")
    const wf = await newWorkflow(s.tenantId)
    expect(await (await assign(s.token, wf, first.id)).json()).toEqual({ workflow_id: wf, voice_id: first.id })
    const voices = await list(s.token)
    expect(voices.map((v) => [v.name, v.workflow_ids])).toEqual([
      ["Second", []],
      ["First", [wf]],
    ])
    expect(voices[1]).toMatchObject({ id: first.id, sample_sha256: first.sample_sha256 })
    expect(second.id).toBeGreaterThan(first.id)
  })

  it("assigns, reassigns and clears (null); refuses live and retired workflows with 409", async () => {
    const s = await a.signup()
    const [v1, v2] = [await newVoice(s.token), await newVoice(s.token)]
    const wf = await newWorkflow(s.tenantId)
    expect((await assign(s.token, wf, v1.id)).status).toBe(200)
    expect(await assignedVoice(wf)).toBe(v1.id)
    expect((await assign(s.token, wf, v2.id)).status).toBe(200)
    expect(await assignedVoice(wf)).toBe(v2.id)
    expect(await (await assign(s.token, wf, null)).json()).toEqual({ workflow_id: wf, voice_id: null })
    expect(await assignedVoice(wf)).toBeNull()

    const live = await newWorkflow(s.tenantId, "live")
    expect(await errorOf(await assign(s.token, live, v1.id))).toMatchObject({ status: 409, code: "WORKFLOW_LIVE" })
    const retired = await newWorkflow(s.tenantId, "retired")
    expect(await errorOf(await assign(s.token, retired, v1.id))).toMatchObject({
      status: 409,
      code: "WORKFLOW_RETIRED",
    })
    expect([await assignedVoice(live), await assignedVoice(retired)]).toEqual([null, null])
  })

  it("validates the body: 422 on the field", async () => {
    const s = await a.signup()
    const bad = async (body: unknown, field: string) => {
      const res = await a.call("PUT", "/api/voice-avatars/assign", { token: s.token, body })
      expect(await res.json()).toMatchObject({ code: "VALIDATION_FAILED", field })
      expect(res.status).toBe(422)
    }
    await bad({ voice_id: 1 }, "workflow_id")
    await bad({ workflow_id: 1 }, "voice_id")
    await bad({ workflow_id: 1, voice_id: "2" }, "voice_id")
    await bad({ workflow_id: -1, voice_id: null }, "workflow_id")
    expect((await remove(s.token, "abc")).status).toBe(422)
  })
})

describe("deleting", () => {
  it("clears it from draft workflows, removes its sample and clips; 404 afterwards", async () => {
    const s = await a.signup()
    const v = await newVoice(s.token)
    const wf = await newWorkflow(s.tenantId)
    await assign(s.token, wf, v.id)
    const preview = await a.call("POST", "/api/workflows/preview-opening", {
      token: s.token,
      body: { text: "Hello there, a quick call.", workflow_id: wf },
    })
    const { clip_id } = (await preview.json()) as { clip_id: string }
    const file = join(srv.config.dataDir, "voice-samples", `${v.sample_sha256}.wav`)
    expect(existsSync(file)).toBe(true)

    const res = await remove(s.token, v.id)
    expect(await res.json()).toEqual({ id: v.id, deleted: true })
    expect(await assignedVoice(wf)).toBeNull()
    expect(existsSync(file)).toBe(false)
    expect(await srv.sql`select id from speech_clips where id = ${clip_id}`).toHaveLength(0)
    const [row] = await srv.sql`select deleted_at is not null as deleted from voice_avatars where id = ${v.id}`
    expect(row).toEqual({ deleted: true })
    expect(await list(s.token)).toEqual([])
    expect(await errorOf(await remove(s.token, v.id))).toMatchObject({ status: 404, code: "NOT_FOUND" })
    expect(await errorOf(await assign(s.token, wf, v.id))).toMatchObject({ status: 404 })
    expect((await a.call("GET", `/api/workflows/preview-opening/${clip_id}`)).status).toBe(404)
  })

  it("keeps a sample another voice was made from", async () => {
    const s = await a.signup()
    const bytes = wav({ hz: 333, seconds: 5 })
    const sample = { bytes, filename: "same.wav", type: "audio/wav" }
    const one = (await (await postClone(srv.url, s.token, { name: "A", sample })).json()) as { id: number }
    const two = (await (await postClone(srv.url, s.token, { name: "B", sample })).json()) as { sample_sha256: string }
    expect((await remove(s.token, one.id)).status).toBe(200)
    expect(existsSync(join(srv.config.dataDir, "voice-samples", `${two.sample_sha256}.wav`))).toBe(true)
  })

  it("while a live workflow speaks with it: 409 WORKFLOW_LIVE, nothing changes", async () => {
    const s = await a.signup()
    const v = await newVoice(s.token)
    const wf = await newWorkflow(s.tenantId)
    await assign(s.token, wf, v.id)
    await srv.sql`update workflows set status = 'live' where id = ${wf}`
    const res = await remove(s.token, v.id)
    expect(await res.json()).toMatchObject({ code: "WORKFLOW_LIVE", workflow_ids: [wf] })
    expect(res.status).toBe(409)
    expect(await assignedVoice(wf)).toBe(v.id)
    expect((await list(s.token)).map((x) => x.id)).toEqual([v.id])
    await srv.sql`update workflows set status = 'paused' where id = ${wf}`
    expect((await remove(s.token, v.id)).status).toBe(200)
    expect(await assignedVoice(wf)).toBeNull()
  })
})

describe("another workspace", () => {
  let owner: Session
  let other: Session
  let voice: number
  let workflow: number
  beforeAll(async () => {
    owner = await a.signup()
    other = await a.signup()
    voice = (await newVoice(owner.token)).id
    workflow = await newWorkflow(owner.tenantId)
  })

  it("cannot see, delete or assign the voice, nor assign to the workflow: 404", async () => {
    expect(await list(other.token)).toEqual([])
    expect(await errorOf(await remove(other.token, voice))).toMatchObject({ status: 404, code: "NOT_FOUND" })
    const theirs = await newWorkflow(other.tenantId)
    expect(await errorOf(await assign(other.token, theirs, voice))).toMatchObject({ status: 404 })
    const mine = await newVoice(other.token)
    expect(await errorOf(await assign(other.token, workflow, mine.id))).toMatchObject({ status: 404 })
    expect(await errorOf(await assign(other.token, workflow, null))).toMatchObject({ status: 404 })
    expect([await assignedVoice(theirs), await assignedVoice(workflow)]).toEqual([null, null])
    expect((await list(owner.token)).map((v) => v.id)).toEqual([voice])
  })
})

describe("scopes", () => {
  it("read lists; write clones and assigns; only admin deletes; no credential is 401", async () => {
    const s = await a.signup()
    const wf = await newWorkflow(s.tenantId)
    const read = (await a.createKey(s, { name: "r", scope: "read" })).secret
    const write = (await a.createKey(s, { name: "w", scope: "write" })).secret
    const admin = (await a.createKey(s, { name: "a", scope: "admin" })).secret

    expect((await a.call("GET", "/api/voice-avatars", { token: read })).status).toBe(200)
    const sample = { bytes: wav({ hz: 140, seconds: 5 }), filename: "k.wav", type: "audio/wav" }
    expect(await errorOf(await postClone(srv.url, read, { name: "R", sample }))).toMatchObject({
      status: 403,
      code: "INSUFFICIENT_SCOPE",
    })
    const v = await newVoice(write, "By key")
    expect(await errorOf(await assign(read, wf, v.id))).toMatchObject({ status: 403 })
    expect((await assign(write, wf, v.id)).status).toBe(200)
    expect(await errorOf(await remove(write, v.id))).toMatchObject({ status: 403, code: "INSUFFICIENT_SCOPE" })
    expect((await remove(admin, v.id)).status).toBe(200)

    expect((await a.call("GET", "/api/voice-avatars")).status).toBe(401)
    expect((await postClone(srv.url, undefined, { name: "Anon", sample })).status).toBe(401)
  })
})
