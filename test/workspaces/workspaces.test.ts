// The workspace's own name: asked at signup (or derived from the business the address belongs to),
// renamed by owners and admins, shown by GET /auth/me and /api/workspace, and heard by callees.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { businessOfEmail, defaultWorkspaceName } from "../../src/workspaces/workspace-name.js"
import { api, FAST_RUNTIME_ENV, type Session, uniqueEmail } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

describe("the default name", () => {
  it("is the business of a company address, else the person's workspace", () => {
    expect(businessOfEmail("ops@acme-dental.com")).toBe("Acme Dental")
    expect(businessOfEmail("ravi@sharma.co.in")).toBe("Sharma")
    expect(businessOfEmail("me@shop.example.co.uk")).toBe("Example")
    expect(businessOfEmail("ops@gmail.com")).toBeUndefined()
    expect(businessOfEmail("ops@example.com")).toBeUndefined()
    expect(defaultWorkspaceName({ email: "ops@gmail.com", fullName: "Asha Rao" })).toBe("Asha Rao's workspace")
    expect(defaultWorkspaceName({ email: "ops.team@gmail.com" })).toBe("Ops Team's workspace")
    expect(defaultWorkspaceName({ email: "ops@acme-dental.com", workspaceName: "  Bright\n Smiles  " })).toBe(
      "Bright Smiles",
    )
  })
})

describe("naming the workspace", () => {
  let srv: TestServer
  let a: ReturnType<typeof api>
  beforeAll(async () => {
    srv = await sharedTestServer({ env: FAST_RUNTIME_ENV })
    a = api(srv)
  })
  afterAll(async () => srv?.stop())

  const call = async (s: Session | string, method: string, path: string, body?: unknown) => {
    const res = await a.call(method, path, {
      token: typeof s === "string" ? s : s.token,
      ...(body !== undefined && { body }),
    })
    return { status: res.status, body: (await res.json()) as Json }
  }

  it("takes workspace_name at signup and refuses an empty or over-long one", async () => {
    const email = uniqueEmail()
    const made = await a.call("POST", "/auth/signup", {
      body: { email, password: "correct horse battery staple", workspace_name: "Bright Smiles Dental" },
    })
    expect(made.status).toBe(201)
    expect(((await made.json()) as Json).tenant.name).toBe("Bright Smiles Dental")
    for (const workspace_name of ["   ", "x".repeat(81)]) {
      const r = await a.call("POST", "/auth/signup", {
        body: { email: uniqueEmail(), password: "correct horse battery staple", workspace_name },
      })
      expect(r.status).toBe(422)
      expect(((await r.json()) as Json).errors[0].field).toBe("workspace_name")
    }
  })

  it("owners and admins rename it (audited); supervisors, analysts and write keys may not", async () => {
    const owner = await a.signup({ full_name: "Asha" })
    expect((await call(owner, "GET", "/api/workspace")).body.name).toBe("Asha's workspace")
    const admin = await a.addMember(owner, "admin")
    const analyst = await a.addMember(owner, "analyst")
    const writeKey = (await a.createKey(owner, { name: "w", scope: "write" })).secret
    expect((await call(analyst, "PATCH", "/api/workspace", { name: "Mine" })).body.code).toBe("INSUFFICIENT_ROLE")
    expect((await call(writeKey, "PATCH", "/api/workspace", { name: "Mine" })).body.code).toBe("INSUFFICIENT_SCOPE")
    expect((await call(admin, "PATCH", "/api/workspace", { name: "" })).status).toBe(422)
    const renamed = await call(admin, "PATCH", "/api/workspace", { name: "  Acme   Renewals " })
    expect(renamed).toMatchObject({ status: 200, body: { id: owner.tenantId, name: "Acme Renewals" } })
    expect((await call(analyst, "GET", "/auth/me")).body.tenant.name).toBe("Acme Renewals")
    const log = (await call(owner, "GET", "/audit?action=workspace.renamed")).body.events
    expect(log).toMatchObject([
      { actor: `user:${admin.userId}`, before: { name: "Asha's workspace" }, after: { name: "Acme Renewals" } },
    ])
  })

  it("callees hear the new name in the opening line", async () => {
    const s = await a.signup({ country: "US" })
    const intent = (await call(s, "POST", "/billing/topup", { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    expect((await call(s, "PATCH", "/api/workspace", { name: "Northwind Gyms" })).status).toBe(200)
    const w = (await call(s, "POST", "/api/workflows", { nl_prompt: "Call members about renewing their plan." })).body
    expect(w.rule_book.opening_line).toContain("{company}")
    await call(s, "POST", `/api/workflows/${w.id}/audience`, { rows: [{ phone: "+12025550113", name: "Dana" }] })
    await call(s, "PUT", `/api/workflows/${w.id}/compliance`, {
      consent_attestation_text: "All numbers opted in on our website.",
    })
    const started = await call(s, "POST", `/api/workflows/${w.id}/run`)
    expect(started.status, JSON.stringify(started.body)).toBe(201)
    const deadline = Date.now() + 20_000
    let text: string | undefined
    while (text === undefined && Date.now() < deadline) {
      const [turn] = await srv.sql<[{ text: string }?]>`
        select text from turns where run_id = ${started.body.run_id} and speaker = 'agent' order by seq limit 1`
      text = turn?.text
      if (text === undefined) await new Promise((r) => setTimeout(r, 100))
    }
    expect(text).toContain("Northwind Gyms")
    expect(text).not.toContain("workspace")
  })
})
