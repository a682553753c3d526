// Deeply nested JSON (issue 33): a body nesting arrays and objects past 64 levels is refused where
// it is parsed, with the contract's 422 VALIDATION_FAILED naming the field, before zod or a handler
// walks it (5,000 levels under persona attributes was a 500); webhooks' raw bodies the same way.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let owner: Session
const systemKey = randomBytes(24).toString("hex")

beforeAll(async () => {
  srv = await startTestServer({ env: { SYSTEM_KEY: systemKey } })
  owner = await api(srv).signup()
}, 60_000)
afterAll(async () => {
  await srv?.stop()
})

/** JSON text `levels` arrays and objects deep, alternating: {"a":[{"a":[…1…]}]}. */
function nested(levels: number): string {
  const open: string[] = []
  const close: string[] = []
  for (let i = 0; i < levels; i++) {
    open.push(i % 2 === 0 ? '{"a":' : "[")
    close.push(i % 2 === 0 ? "}" : "]")
  }
  return `${open.join("")}1${close.reverse().join("")}`
}

const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(srv.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${owner.token}`, ...headers },
    body,
  })

/** The contract's 422 for a body nested too deep under `field`. */
const tooDeep = (field: string) => ({
  error: expect.stringContaining("more than 64 levels deep"),
  code: "VALIDATION_FAILED",
  field,
  errors: [{ field, message: "must not nest arrays and objects more than 64 levels deep" }],
})

describe("JSON nested too deep", () => {
  it("POST /api/personas with attributes 5,000 deep: 422 naming attributes, and nothing stored", async () => {
    const res = await post("/api/personas", `{"name":"Deep","language":"en-IN","attributes":{"x":${nested(5_000)}}}`)
    expect(res.status).toBe(422)
    expect(await res.json()).toEqual(tooDeep("attributes"))
    const list = await fetch(`${srv.url}/api/personas`, { headers: { authorization: `Bearer ${owner.token}` } })
    expect(JSON.stringify(await list.json())).not.toContain('"Deep"')
  })

  it("64 levels pass the depth check (the persona is made); 65 are 422 with the field", async () => {
    // The body is level 1 and attributes level 2, so x's value brings the body to 2 + its own levels.
    const at64 = await post("/api/personas", `{"name":"Edge 64","language":"en-IN","attributes":{"x":${nested(62)}}}`)
    expect(at64.status, await at64.clone().text()).toBe(201)
    expect(JSON.stringify((await at64.json()) as unknown)).toContain(nested(62))
    const at65 = await post("/api/personas", `{"name":"Edge 65","language":"en-IN","attributes":{"x":${nested(63)}}}`)
    expect(at65.status).toBe(422)
    expect(await at65.json()).toEqual(tooDeep("attributes"))
    // An array at the top counts as level 1 too.
    const top65 = await post("/api/personas", `[${nested(64)}]`)
    expect(await top65.json()).toEqual(tooDeep("0"))
  })

  it("an array body (POST /internal/turns takes one): 5,000 deep in its first element is 422 naming 0", async () => {
    const res = await post("/internal/turns", `[${nested(5_000)}]`, {
      "x-system-key": systemKey,
      "x-tenant-id": String(owner.tenantId),
    })
    expect(res.status).toBe(422)
    expect(await res.json()).toEqual(tooDeep("0"))
  })

  it("an audience's rows (an array of loose objects, stored as they come): 5,000 deep in a row is 422", async () => {
    const created = await post("/api/workflows", JSON.stringify({ nl_prompt: "Call lapsed members back." }))
    expect(created.status, await created.clone().text()).toBe(201)
    const { id } = (await created.json()) as { id: number }
    const rows = `{"rows":[{"phone":"+14155550100"},{"phone":"+14155550101","notes":${nested(5_000)}}]}`
    const res = await post(`/api/workflows/${id}/audience`, rows)
    expect(res.status).toBe(422)
    expect(await res.json()).toEqual(tooDeep("rows"))
  })

  it("1 MiB of '[' or of '{\"a\":' is refused at once, and the server carries on", async () => {
    const MiB = 1024 * 1024
    for (const [body, field] of [
      ["[".repeat(MiB), "0"],
      ['{"a":'.repeat(MiB / 5), "a"],
    ] as const) {
      const res = await post("/api/personas", body)
      expect(res.status).toBe(422)
      expect(await res.json()).toEqual(tooDeep(field))
      expect((await fetch(`${srv.url}/healthz`)).status).toBe(200)
    }
  })

  it("webhooks parse their raw bodies the same way: mail_a with an event 5,000 deep is 422, not stored", async () => {
    const event = `{"event":"delivered","message-id":"m-deep","email":"a@example.com","meta":${nested(5_000)}}`
    const res = await fetch(`${srv.url}/email/webhooks/mail_a`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `[${event}]`,
    })
    expect(res.status).toBe(422)
    expect(await res.json()).toEqual(tooDeep("0"))
    const stored = await srv.sql`select count(*)::int as n from email_webhook_events`
    expect(stored[0]!["n"]).toBe(0)
    const stub = await fetch(`${srv.url}/billing/webhooks/stub`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"external_id":${nested(5_000)},"status":"succeeded"}`,
    })
    expect(stub.status).toBe(422)
    expect(await stub.json()).toEqual(tooDeep("external_id"))
  })
})
