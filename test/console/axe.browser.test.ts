// Every console page under axe-core in Chromium, at 1280 px and 390 px: signed out (sign-in, sign-up,
// a join link), and signed in as an owner whose workspace has data on every page (a campaign with
// its audience, consent and a finished run's results, each of its sections, Analytics too, and the call
// drawer; a webhook endpoint and its deliveries; a DNC entry, an API key, members and the audit log; a callee
// on hold on Live and on Approvals, a card after its call and the Decided tab), plus the verify-email
// banner of an unverified workspace. No violation of serious or critical impact may
// remain; each found is printed with its rule, the elements and what to fix.
import { createRequire } from "node:module"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { type Receiver, startReceiver } from "../webhooks/delivery.support.js"
import { assertBrowser, eventually, launchChromium, skipBrowser, watchProblems } from "./browser.support.js"

const axeSource = (createRequire(import.meta.url)("axe-core") as { source: string }).source

const STEP_MS = 15_000
const WIDTHS = [1280, 390] as const

interface Violation {
  readonly id: string
  readonly impact: string | null
  readonly help: string
  readonly helpUrl: string
  readonly nodes: ReadonlyArray<{ readonly target: ReadonlyArray<unknown>; readonly failureSummary?: string }>
}

/** The violations as a reader wants them: rule, impact, what to do, and each element with its summary. */
function readable(where: string, vs: ReadonlyArray<Violation>): string {
  return vs
    .map(
      (v) =>
        `${where}: [${v.impact}] ${v.id}: ${v.help} (${v.helpUrl})\n` +
        v.nodes
          .map((n) => `    ${n.target.join(" ")}\n      ${(n.failureSummary ?? "").replace(/\n/g, "\n      ")}`)
          .join("\n"),
    )
    .join("\n")
}

type Json = Record<string, any>

describe.skipIf(skipBrowser)("the console under axe-core", () => {
  let srv: TestServer
  let browser: Browser
  let receiver: Receiver
  let owner: Session
  let unverified: Session
  let workflowName = ""
  const found: string[] = []
  const problems: string[][] = []

  const call = async (s: Session, method: string, path: string, body?: unknown) => {
    const res = await api(srv).call(method, path, { token: s.token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }

  /** A page in a context of its own (the CSP is bypassed there only so axe's script can be added). */
  async function newPage(width: number, session?: Session): Promise<{ page: Page; context: BrowserContext }> {
    const context = await browser.newContext({
      viewport: { width, height: 900 },
      locale: "en-US",
      timezoneId: "UTC",
      bypassCSP: true,
    })
    context.setDefaultTimeout(STEP_MS)
    if (session)
      await context.addCookies([
        { name: "svc_session", value: session.cookie.slice("svc_session=".length), url: srv.url },
      ])
    const page = await context.newPage()
    problems.push(watchProblems(page, srv.url))
    return { page, context }
  }

  /** Runs axe on the page as it is now; serious and critical violations are kept for the report. */
  async function check(page: Page, where: string): Promise<void> {
    if (!(await page.evaluate("typeof window.axe !== 'undefined'"))) await page.addScriptTag({ content: axeSource })
    const result = (await page.evaluate(
      "window.axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)",
    )) as Violation[]
    const bad = result.filter((v) => v.impact === "serious" || v.impact === "critical")
    if (process.env.AXE_ALL === "1") console.info(readable(`${where} @${page.viewportSize()?.width}px`, result))
    if (bad.length > 0) found.push(readable(`${where} @${page.viewportSize()?.width}px`, bad))
  }

  async function open(page: Page, link: string, heading: string) {
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: link, exact: true }).click()
    await page.getByRole("heading", { level: 1, name: heading }).waitFor()
  }

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser, receiver] = await Promise.all([
      startTestServer({ env: { ...FAST_RUNTIME_ENV, ALLOW_PRIVATE_PROVIDER_URLS: "true" } }),
      launchChromium(),
      startReceiver(200),
    ])
    const a = api(srv)
    owner = await a.signup({ country: "US", full_name: "Olive Owner" })
    unverified = await a.signup({ verify: false })
    await a.addMember(owner, "supervisor")
    // A campaign with an audience, consent and a finished run with analysed results.
    const created = await call(owner, "POST", "/api/workflows", { nl_prompt: "Ask lapsed members to rejoin the gym." })
    expect(created.status).toBe(201)
    const id = created.body.id as number
    workflowName = created.body.name
    const rows = [
      { phone: "+12025550143", name: "Ann Lee" },
      { phone: "+12025550146", name: "Bo Park" },
    ]
    expect((await call(owner, "POST", `/api/workflows/${id}/audience`, { rows })).status).toBe(200)
    const consent = { consent_attestation_text: "Members opted in to calls when they joined." }
    expect((await call(owner, "PUT", `/api/workflows/${id}/compliance`, consent)).status).toBe(200)
    const run = await call(owner, "POST", `/api/workflows/${id}/run`)
    expect(run.status).toBe(201)
    await eventually(
      async () => (await call(owner, "GET", `/api/runs/${run.body.run_id}/results`)).body,
      (b) => b.run_status === "completed" && b.results.every((r: Json) => r.analysis_status === "done"),
      30_000,
    )
    // The approvals' states: a callee on hold for a discount (a second attempt at Bo, still connected, the
    // hold half an hour away), a proposal whose call has ended, and one decided (the Decided tab).
    const [{ currency }] = await srv.sql<[{ currency: string }]>`
      select currency from wallets where tenant_id = ${owner.tenantId}`
    const [held] = await srv.sql<[{ id: number }]>`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        status, owner_instance, answered_at)
      select tenant_id, run_id, workflow_id, run_target_id, target_id, attempt + 1, phone_e164, provider,
        'connected', 'axe-fixture', now()
      from calls where run_id = ${run.body.run_id} and phone_e164 = '+12025550146' order by attempt desc limit 1
      returning id`
    const transcript = ["callee: Is there any discount?", "agent: Let me check that for you, one moment."]
    const holdUntil = new Date(Date.now() + 30 * 60_000).toISOString()
    const ask = (phone: string, callId: number | null, context: Json) => srv.sql<[{ id: number }]>`
      insert into approvals (tenant_id, workflow_id, run_id, call_id, target_phone, proposed_action,
        proposed_value_minor, currency, rationale, context, expires_at)
      values (${owner.tenantId}, ${id}, ${run.body.run_id}, ${callId}, ${phone}, 'concession', 1000, ${currency},
        'The callee asked for a discount.', ${srv.sql.json(context)}, now() + interval '1 day')
      returning id`
    await ask("+12025550146", held.id, { transcript, hold_until: holdUntil })
    await ask("+12025550143", null, { transcript })
    const [decided] = await ask("+12025550143", null, { transcript })
    const decision = await call(owner, "POST", `/api/approvals/${decided.id}/decide`, {
      decision: "deny",
      note: "Not this month.",
    })
    expect(decision.status).toBe(200)
    // A webhook endpoint with a delivery, a DNC entry and an API key.
    const endpoint = await call(owner, "POST", "/api/webhooks/endpoints", { url: receiver.url, events: ["*"] })
    expect(endpoint.status).toBe(201)
    expect((await call(owner, "POST", `/api/webhooks/endpoints/${endpoint.body.id}/test`)).status).toBe(202)
    await eventually(
      () => Promise.resolve(receiver.received.length),
      (n) => n >= 1,
    )
    expect((await call(owner, "POST", "/dnc/add", { phone_e164: "+12025550199", reason: "asked" })).status).toBe(200)
    await a.createKey(owner, { name: "reporting", scope: "read" })
  }, 90_000)

  afterAll(async () => {
    await browser?.close()
    await receiver?.close()
    await srv?.stop()
  })

  for (const width of WIDTHS) {
    it(`finds nothing serious signed out at ${width} px: sign-in, sign-up and a join link`, async () => {
      const { page, context } = await newPage(width)
      await page.goto(`${srv.url}/console#/signin`)
      await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
      await check(page, "sign-in")
      // A refused sign-in, its error shown.
      await page.getByLabel("Email").fill(owner.email)
      await page.getByLabel("Password").fill("not the password")
      await page.getByRole("button", { name: "Sign in", exact: true }).click()
      await page.getByRole("alert").waitFor()
      await check(page, "sign-in refused")
      await page.getByRole("button", { name: "Create an account", exact: true }).click()
      await page.getByRole("heading", { level: 1, name: "Create an account" }).waitFor()
      await check(page, "sign-up")
      await page.goto(`${srv.url}/console#/join?token=not-a-real-token`)
      await page.getByRole("heading", { level: 1 }).waitFor()
      await check(page, "join")
      await context.close()
    }, 60_000)

    it(`finds nothing serious on any page signed in at ${width} px`, async () => {
      const { page, context } = await newPage(width, owner)
      await page.goto(`${srv.url}/console#/campaigns`)
      await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
      await check(page, "campaigns")
      // The campaign, each of its sections; the results table and the call drawer.
      await page.getByRole("button", { name: workflowName, exact: true }).click()
      const detail = page.getByRole("article")
      await detail.getByRole("heading", { level: 2 }).waitFor()
      for (const section of ["Overview", "Audience", "Rule book", "Consent", "Settings", "Analytics", "Results"]) {
        await detail.getByRole("tab", { name: section, exact: true }).click()
        await page.getByRole("tabpanel", { name: section }).waitFor()
        if (section === "Settings") await detail.getByLabel("Persona").waitFor()
        if (section === "Consent") await detail.getByTestId("attested").waitFor()
        if (section === "Analytics") {
          await detail.getByTestId("heat-mon-0").waitFor()
          await detail.getByText("No experiments.").waitFor()
        }
        await check(page, `campaign: ${section}`)
      }
      await detail.getByRole("button", { name: "Show results" }).click()
      await detail.getByRole("button", { name: "Open the call to Ann Lee" }).waitFor()
      await check(page, "campaign: results table")
      await detail.getByRole("button", { name: "Open the call to Ann Lee" }).click()
      const drawer = page.getByRole("dialog")
      await drawer.getByRole("list", { name: "Turns" }).waitFor()
      await check(page, "call drawer")
      await page.keyboard.press("Escape")
      await drawer.waitFor({ state: "detached" })

      for (const [link, heading, ready] of [
        ["Live", "Live calls", "On hold — waiting for you"],
        ["Approvals", "Approvals", "On hold now"],
        ["Wallet", "Wallet", "Balance"],
        ["Settings", "Settings", "+12025550199"],
        ["Reports", "Reports", "Calls per day"],
        ["Members", "Members", owner.email],
        ["Webhooks", "Webhooks", receiver.url],
        ["Audit log", "Audit log", "invited"],
      ] as const) {
        await open(page, link, heading)
        await page.locator("main").getByText(ready).first().waitFor()
        if (link === "Webhooks") {
          await page.getByRole("button", { name: "Show deliveries" }).click()
          await page.getByRole("table", { name: "Delivery attempts, newest first" }).waitFor()
        }
        if (link === "Reports") await page.locator("canvas").first().waitFor()
        if (link === "Approvals") await page.getByRole("region", { name: "After the call" }).waitFor()
        await check(page, heading)
        if (link === "Approvals") {
          await page.getByRole("tab", { name: "Decided", exact: true }).click()
          await page
            .getByRole("region", { name: "Decided approvals, newest first" })
            .getByText("Not this month.")
            .waitFor()
          await check(page, "Approvals: decided")
        }
      }
      await context.close()
    }, 90_000)

    it(`finds nothing serious in the verify-email banner at ${width} px`, async () => {
      const { page, context } = await newPage(width, unverified)
      await page.goto(`${srv.url}/console#/settings`)
      await page.getByRole("region", { name: "Verify your email" }).waitFor()
      await page.getByRole("heading", { level: 1, name: "Settings" }).waitFor()
      await check(page, "verify-email banner")
      await context.close()
    }, 30_000)
  }

  it("found no serious or critical violation on any page, at either width", () => {
    expect(found.join("\n\n"), `\n${found.join("\n\n")}\n`).toBe("")
    expect(problems.flat()).toEqual([])
  })
})
