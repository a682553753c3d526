// What a new operator meets in Chromium, from signup to a campaign's calls (issue 34): the
// workspace's name asked at signup and renamed in Settings; one error per problem; the verify-email
// banner with "Send the link again" (and its limit, said in words); a campaign's sections, whose
// "not ready" line follows each fix; consent that starts empty and needs an explicit confirmation,
// then says who attested and when; the rule book in words with the opening line edited, saved and
// previewed as edited; results searched, filtered, sorted and opened in the call drawer (Escape
// closes it and the focus comes back); the Webhooks page (add, test ping, delivery retried, new
// secret, delete); campaign search; approvals by campaign; the simulator named as such; and the
// same pages at 390 px.
import type { Browser, BrowserContext, Page, Request } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { api, FAST_RUNTIME_ENV, uniqueEmail } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { type Receiver, startReceiver } from "../webhooks/delivery.support.js"
import { assertBrowser, eventually, launchChromium, screenshot, skipBrowser, watchProblems } from "./browser.support.js"

const STEP_MS = 15_000
const PASSWORD = "correct horse battery staple"
const NAME = "Acme Dental"
const RENAMED = "Acme Dental Care"
/** 3 agrees, 6 declines (the simulator's last-digit personas). */
const AGREES = "+12025550143"
const DECLINES = "+12025550146"

type Json = Record<string, any>

describe.skipIf(skipBrowser)("the operator's console in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let context: BrowserContext
  let page: Page
  let problems: string[]
  let receiver: Receiver
  const email = uniqueEmail("operator")
  let token = ""
  let userId = 0
  let workflow = { id: 0, name: "" }
  let other = { id: 0, name: "" }

  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> => {
    const res = await api(srv).call(method, path, { token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }
  const detail = () => page.getByRole("article")
  const tab = (name: string) => detail().getByRole("tab", { name, exact: true })
  async function open(link: string, heading: string) {
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: link, exact: true }).click()
    await page.getByRole("heading", { level: 1, name: heading }).waitFor()
  }
  async function choose(name: string) {
    await open("Campaigns", "Campaigns")
    await page.getByRole("button", { name, exact: true }).click()
    await detail().getByRole("heading", { level: 2 }).filter({ hasText: name }).waitFor()
  }
  /** Scrolls the page so the element starts at the top (for a picture of it). */
  const toTop = (l: ReturnType<Page["locator"]>) => l.evaluate((el) => el.scrollIntoView({ block: "start" }))
  const verifyLink = () =>
    readOutbox(srv.config.outboxFile)
      .filter((m) => m.kind === "verify_email" && m.to === email)
      .at(-1)?.links[0]

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser, receiver] = await Promise.all([
      startTestServer({ env: { ...FAST_RUNTIME_ENV, ALLOW_PRIVATE_PROVIDER_URLS: "true" } }),
      launchChromium(),
      // The first delivery fails (so there is one to retry), the rest succeed.
      startReceiver((n) => (n === 1 ? 500 : 200)),
    ])
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US", timezoneId: "UTC" })
    context.setDefaultTimeout(STEP_MS)
    page = await context.newPage()
    problems = watchProblems(page, srv.url)
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await receiver?.close()
    await srv?.stop()
  })

  it("signs up with the workspace's name, showing each problem once", async () => {
    await page.goto(`${srv.url}/console`)
    await page.getByRole("button", { name: "Create an account", exact: true }).click()
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill("short")
    const workspace = page.getByLabel("Company or workspace name (optional)")
    expect(await page.getByText(/calling from <name>/).count()).toBe(1)
    await workspace.fill(NAME)
    await page.getByRole("button", { name: "Create account", exact: true }).click()
    // The password's problem is said once, beside its field, and in words.
    const said = page.getByText("must be at least 10 characters")
    await said.waitFor()
    expect(await said.count()).toBe(1)
    expect(await page.getByRole("alert").count()).toBe(0)
    expect(await page.locator("main").textContent()).not.toMatch(/VALIDATION_FAILED|invalid request body/)
    await page.getByLabel("Password").fill(PASSWORD)
    await page.getByRole("button", { name: "Create account", exact: true }).click()
    await page.getByRole("status").filter({ hasText: "verification email" }).waitFor()
    const [row] = await srv.sql<[{ id: number; name: string }]>`select t.id, t.name from tenants t
      join users u on u.tenant_id = t.id where lower(u.email) = ${email}`
    expect(row.name).toBe(NAME)

    await page.getByLabel("Password").fill(PASSWORD)
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    const login = await api(srv).login(email, PASSWORD)
    token = login.token
    userId = login.userId
  }, 30_000)

  it("shows the verify banner on each page, resends the link, says when to retry, and goes once verified", async () => {
    const banner = page.getByRole("region", { name: "Verify your email" })
    for (const [link, heading] of [
      ["Settings", "Settings"],
      ["Webhooks", "Webhooks"],
      ["Campaigns", "Campaigns"],
    ] as const) {
      await open(link, heading)
      await banner.waitFor()
    }
    const before = readOutbox(srv.config.outboxFile).filter((m) => m.to === email).length
    const resend = banner.getByRole("button", { name: "Send the link again" })
    await resend.click()
    await banner
      .getByRole("status")
      .filter({ hasText: `on its way to ${email}` })
      .waitFor()
    expect(readOutbox(srv.config.outboxFile).filter((m) => m.to === email).length).toBe(before + 1)
    await screenshot(page, "verify-banner")
    // At most five an hour: the sixth is refused, and the banner says when to try again, in words.
    for (let i = 0; i < 4; i++) {
      const answered = page.waitForResponse((r) => r.url().endsWith("/auth/verify-email/resend"))
      await resend.click()
      expect((await answered).status()).toBe(200)
    }
    await resend.click()
    const limit = banner.getByRole("alert")
    await limit.filter({ hasText: /Try again in about \d+ minutes?\./ }).waitFor()
    expect(await limit.textContent()).not.toMatch(/RATE_LIMITED|429/)

    // The newest link, opened (as from the mail): back on the page, the banner is gone.
    const link = verifyLink()
    expect(link).toBeDefined()
    expect((await api(srv).call("GET", new URL(link!, srv.url).pathname + new URL(link!, srv.url).search)).status).toBe(
      200,
    )
    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    expect(await banner.count()).toBe(0)
  }, 30_000)

  it("shows the workspace's name in Settings, renames it there, and names the simulator as such", async () => {
    await open("Settings", "Settings")
    const name = page.getByLabel("Workspace name", { exact: true })
    await expect.poll(() => name.inputValue()).toBe(NAME)
    await name.fill(RENAMED)
    await page.getByRole("button", { name: "Save name" }).click()
    await page
      .getByRole("status")
      .filter({ hasText: `calling from ${RENAMED}` })
      .waitFor()
    expect((await call("GET", "/api/workspace")).body.name).toBe(RENAMED)
    expect((await call("GET", "/auth/me")).body.tenant.name).toBe(RENAMED)
    await page.reload()
    await expect.poll(() => page.getByLabel("Workspace name", { exact: true }).inputValue()).toBe(RENAMED)

    const providers = page.getByRole("table", { name: "Provider credentials (secrets masked)" })
    await providers.waitFor()
    const statuses = await providers.locator("tbody tr td:nth-child(2)").allTextContents()
    expect(statuses.length).toBeGreaterThan(0)
    for (const s of statuses) expect(s).toBe("Simulator (built in)")
    expect(await providers.textContent()).not.toMatch(/not[ _]configured/)
    await toTop(page.getByRole("region", { name: "Onboarding" }))
    await screenshot(page, "settings-providers")
  }, 30_000)

  it("says what a campaign still needs, following each fix; consent starts empty and needs confirming", async () => {
    const created = await call("POST", "/api/workflows", {
      nl_prompt: "Call lapsed dental patients to book their next check-up; up to $15 off the cleaning.",
    })
    expect(created.status).toBe(201)
    workflow = { id: created.body.id, name: created.body.name }
    await choose(workflow.name)
    const readiness = detail().getByTestId("readiness")
    const run = detail().getByRole("button", { name: "Run", exact: true })
    await expect.poll(() => readiness.textContent()).toMatch(/an audience.*and a consent attestation/)
    expect(await readiness.textContent()).not.toMatch(/email_verified|compliance|audience,/)
    expect(await run.isDisabled()).toBe(true)

    // The audience: a row that is not a number is named in words.
    await tab("Audience").click()
    const csv = `phone,name\n${AGREES},Ann Lee\n${DECLINES},Bo Park\nnot-a-number,Nobody\n`
    await detail()
      .getByLabel("Audience CSV")
      .setInputFiles({ name: "audience.csv", mimeType: "text/csv", buffer: Buffer.from(csv) })
    await detail().getByRole("button", { name: "Upload audience" }).click()
    const counts = detail()
      .getByRole("status")
      .filter({ hasText: /Accepted 2, rejected 1/ })
    await counts.waitFor()
    expect(await counts.textContent()).toContain("not a phone number")
    expect(await counts.textContent()).not.toContain("not_a_number")
    await expect
      .poll(() => readiness.textContent())
      .toMatch(/^Not ready to run yet\. It still needs a consent attestation\.$/)

    // Consent: the box is empty, Save waits for the confirmation.
    await tab("Consent").click()
    const statement = detail().getByLabel("Consent statement")
    const confirm = detail().getByRole("checkbox", { name: /I confirm every number in this audience gave consent/ })
    const attest = detail().getByRole("button", { name: "Attest consent" })
    expect(await statement.inputValue()).toBe("")
    expect(await statement.getAttribute("placeholder")).toMatch(/^For example/)
    expect(await attest.isDisabled()).toBe(true)
    const text = "Every patient on this list asked for recall calls at the front desk; the forms are on file."
    await statement.fill(text)
    expect(await attest.isDisabled()).toBe(true)
    await confirm.check()
    expect(await attest.isEnabled()).toBe(true)
    await toTop(detail())
    await screenshot(page, "campaigns-consent")
    await attest.click()
    const attested = detail().getByTestId("attested")
    await attested.waitFor()
    await expect.poll(() => attested.textContent()).toMatch(new RegExp(`Consent attested by ${email} on .+:${text}`))
    const stored = (await call("GET", `/api/workflows/${workflow.id}`)).body
    expect(stored.compliance).toMatchObject({
      attested: true,
      consent_attestation_text: text,
      consent_attested_by_user_id: userId,
    })
    // Fixed: the line is gone and Run is offered, without a reload.
    await readiness.waitFor({ state: "detached" })
    expect(await run.isEnabled()).toBe(true)
    // Nothing on the page ever said it in codes.
    expect(await page.locator("main").textContent()).not.toMatch(/WORKFLOW_NOT_READY|email_verified/)
  }, 45_000)

  it("reads the rule book in words and saves and previews an edited opening line", async () => {
    const policy = { concession_policy: { allowed: true, cap_minor: 1500, requires_approval: true } }
    expect((await call("PUT", `/api/workflows/${workflow.id}`, policy)).status).toBe(200)
    await page.reload()
    await choose(workflow.name)
    await tab("Rule book").click()
    const panel = page.getByRole("tabpanel", { name: "Rule book" })
    const text = (await panel.textContent()) ?? ""
    for (const raw of ["Cap minor", "cap_minor", "Objection id", "objection_id", "Schema version", "schema_version"])
      expect(text, raw).not.toContain(raw)
    for (const heading of [
      "Goal",
      "Objections and answers",
      "Discounts",
      "Calling back",
      "Passing the call to a person",
    ])
      await panel.getByRole("heading", { name: heading, exact: true }).waitFor()
    expect(text).toMatch(/The agent may offer up to \$15\.00 off\./)
    expect(text).toMatch(/If they say “.+” .*the agent answers “.+”/)
    await toTop(panel.getByRole("heading", { name: "Rule book", exact: false }).first())
    await screenshot(page, "campaigns-rule-book")

    const book = (await call("GET", `/api/workflows/${workflow.id}`)).body
    const voices = (await call("GET", "/voices")).body.voices as { id: string; name: string }[]
    const agent = voices.find((v) => v.id === book.persona)!.name
    const line = panel.getByLabel("What the agent says first")
    expect(await line.inputValue()).toBe(book.rule_book.opening_line)
    for (const p of ["{name}", "{agent_name}", "{company}"]) await panel.getByText(p, { exact: true }).waitFor()
    const edited = "Hi {name}, it's {agent_name} from {company}: time for your check-up?"
    await line.fill(edited)
    const heard = `Hi Alex, it's ${agent} from ${RENAMED}: time for your check-up?`
    await panel.getByText(`“${heard}”`).waitFor()
    const put = page.waitForResponse((r) => r.request().method() === "PUT" && r.url().endsWith(`/${workflow.id}`))
    await panel.getByRole("button", { name: "Save opening line" }).click()
    expect((await put).status()).toBe(200)
    await panel.getByRole("status").filter({ hasText: "Opening line saved." }).waitFor()
    expect((await call("GET", `/api/workflows/${workflow.id}`)).body.rule_book.opening_line).toBe(edited)

    // The preview speaks the edited line, its placeholders filled as a call would.
    const asked = page.waitForRequest((r: Request) => r.url().endsWith("/api/workflows/preview-opening"))
    await panel.getByRole("button", { name: "Preview opening" }).click()
    expect((await asked).postDataJSON()).toEqual({ text: heard, workflow_id: workflow.id })
    await panel.getByLabel("Opening line preview").waitFor()
  }, 30_000)

  it("runs, then finds, filters and sorts the results, and opens a call in the drawer from the keyboard", async () => {
    await detail().getByRole("button", { name: "Run", exact: true }).click()
    await detail()
      .getByRole("status")
      .filter({ hasText: /^Run \d+ started: 2 queued\.$/ })
      .waitFor()
    const runId = (await call("GET", `/api/workflows/${workflow.id}/runs`)).body.runs[0].run_id as number
    await eventually(
      async () => (await call("GET", `/api/runs/${runId}/results`)).body,
      (b) => b.run_status === "completed" && b.results.every((r: Json) => r.analysis_status === "done"),
      30_000,
    )
    await page.reload()
    await choose(workflow.name)
    await tab("Results").click()
    const runs = detail().getByRole("region", { name: "Runs and results" })
    const runRow = runs.getByRole("row").filter({ has: page.getByRole("cell", { name: String(runId), exact: true }) })
    expect((await runRow.getByRole("cell").allTextContents())[2]).toBe("Finished")
    await runRow.getByRole("button", { name: "Show results" }).click()
    const table = runs.getByRole("table", { name: `One row per target of run ${runId}` })
    await table.waitFor()
    const outcomes = () => table.locator("tbody tr td:nth-child(3)").allTextContents()
    await expect.poll(outcomes).toEqual(["Agreed", "Declined"])

    // Sorted by name, descending on the second press.
    const nameHeader = table.getByRole("columnheader", { name: "Name" })
    await nameHeader.getByRole("button").click()
    expect(await nameHeader.getAttribute("aria-sort")).toBe("ascending")
    await nameHeader.getByRole("button").click()
    expect(await nameHeader.getAttribute("aria-sort")).toBe("descending")
    expect(await table.locator("tbody tr td:nth-child(1)").allTextContents()).toEqual(["Bo Park", "Ann Lee"])
    // Filtered by outcome, searched by phone digits.
    await runs.getByLabel("Outcome").selectOption("Declined")
    await expect.poll(outcomes).toEqual(["Declined"])
    await runs.getByLabel("Outcome").selectOption("")
    await runs.getByLabel("Search by name or phone").fill("0143")
    await expect.poll(outcomes).toEqual(["Agreed"])
    // The results scroll sideways by keyboard: their box is a named region that takes the focus.
    const box = runs.getByRole("region", { name: `One row per target of run ${runId}` })
    expect(await box.getAttribute("tabindex")).toBe("0")

    // The drawer: opened from the row by keyboard, the transcript and analysis, Escape back to the row.
    const opener = table.getByRole("button", { name: "Open the call to Ann Lee" })
    await opener.focus()
    await page.keyboard.press("Enter")
    const drawer = page.getByRole("dialog", { name: `Call to Ann Lee (${AGREES})` })
    await drawer.waitFor()
    const turns = drawer.getByRole("list", { name: "Turns" }).getByRole("listitem")
    await expect.poll(() => turns.count()).toBeGreaterThan(1)
    const analysis = drawer.getByRole("region", { name: "Analysis" })
    await analysis.getByText("Positive", { exact: true }).waitFor()
    expect(await drawer.locator("dt:text-is('Outcome') + dd").textContent()).toBe("Agreed")
    await screenshot(page, "call-drawer")
    await page.keyboard.press("Escape")
    await drawer.waitFor({ state: "detached" })
    expect(await opener.evaluate((el) => el === (el.ownerDocument as any).activeElement)).toBe(true)
  }, 60_000)

  it("finds campaigns by name and status", async () => {
    const made = await call("POST", "/api/workflows", { nl_prompt: "Remind gym members about the new opening hours." })
    expect(made.status).toBe(201)
    other = { id: made.body.id, name: made.body.name }
    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    const listed = (name: string) => page.getByRole("button", { name, exact: true })
    await listed(other.name).waitFor()
    await page.getByLabel("Search campaigns").fill(workflow.name.slice(0, 8))
    await listed(other.name).waitFor({ state: "detached" })
    await listed(workflow.name).waitFor()
    await page.getByLabel("Search campaigns").fill("")
    await page.getByLabel("Status").selectOption("draft")
    expect(await page.getByRole("region", { name: /^Paused/ }).count()).toBe(0)
    await listed(other.name).waitFor()
    await page.getByLabel("Status").selectOption("")
  }, 30_000)

  it("filters the approval queue by campaign", async () => {
    // One concession waiting in each campaign, as a held call writes them.
    for (const [w, phone] of [
      [workflow, "+12025550107"],
      [other, "+12025550117"],
    ] as const)
      await srv.sql`insert into approvals (tenant_id, workflow_id, target_phone, proposed_action,
          proposed_value_minor, currency, rationale, context, expires_at)
        select tenant_id, ${w.id}, ${phone}, 'concession', 1000, currency, 'Asked for a discount',
          ${srv.sql.json({ transcript: ["callee: Any discount?"] })}, now() + interval '30 minutes'
        from wallets where tenant_id = (select tenant_id from workflows where id = ${w.id})`
    await open("Approvals", "Approvals")
    const cards = page.getByRole("article")
    await expect.poll(() => cards.count()).toBe(2)
    const campaign = page.getByLabel("Campaign", { exact: true })
    await expect
      .poll(() => campaign.locator("option").allTextContents())
      .toEqual(expect.arrayContaining(["Every campaign", workflow.name, other.name]))
    await campaign.selectOption({ label: other.name })
    await expect.poll(() => cards.count()).toBe(1)
    await page.getByRole("article", { name: "Concession for +12025550117" }).waitFor()
    await campaign.selectOption("")
    await expect.poll(() => cards.count()).toBe(2)
  }, 30_000)

  it("adds a webhook endpoint, pings it, retries the failed delivery, makes a new secret and deletes it", async () => {
    await open("Webhooks", "Webhooks")
    await page.getByLabel("Endpoint URL").fill(receiver.url)
    await page.getByLabel("Description (optional)").fill("Our CRM")
    await page.getByRole("checkbox", { name: /^All events/ }).uncheck()
    await page.getByRole("checkbox", { name: /An approval was asked for/ }).check()
    await page.getByRole("checkbox", { name: /A call ended/ }).check()
    await page.getByRole("button", { name: "Add endpoint" }).click()
    const secret = page.getByTestId("webhook-secret")
    await secret.waitFor()
    const shown = (await secret.textContent()) ?? ""
    expect(shown).toMatch(/^whsec_/)
    const listed = (await call("GET", "/api/webhooks/endpoints")).body.endpoints as Json[]
    expect(listed).toHaveLength(1)
    expect(listed[0]).toMatchObject({ url: receiver.url, description: "Our CRM" })
    expect([...listed[0]!.events].sort()).toEqual(["approval.requested", "call.completed"])
    await page.getByRole("button", { name: "Done" }).click()
    expect(await page.content()).not.toContain(shown)

    const card = page.getByRole("article", { name: receiver.url })
    expect(await card.textContent()).toContain("An approval was asked for")
    await card.getByRole("button", { name: "Send test ping" }).click()
    await card.getByRole("status").filter({ hasText: "Test ping sent" }).waitFor()
    // The receiver answers the first attempt 500: the delivery waits for its retry, which Retry brings now.
    const deliveries = card.getByRole("table", { name: "Delivery attempts, newest first" })
    await expect
      .poll(
        async () => {
          await card.getByRole("button", { name: "Refresh deliveries" }).click()
          return deliveries.locator("tbody tr").first().textContent()
        },
        { timeout: 20_000 },
      )
      .toMatch(/A test ping1Failed, will retry \(HTTP 500\)/)
    await toTop(card)
    await screenshot(page, "webhooks")
    await card.getByRole("button", { name: /^Retry delivery/ }).click()
    await expect
      .poll(
        async () => {
          await card.getByRole("button", { name: "Refresh deliveries" }).click()
          return deliveries.locator("tbody tr").first().textContent()
        },
        { timeout: 20_000 },
      )
      .toMatch(/A test ping2Delivered \(HTTP 200\)/)
    expect(receiver.received.length).toBe(2)

    await card.getByRole("button", { name: "New signing secret" }).click()
    await expect.poll(async () => (await secret.textContent()) ?? "").toMatch(/^whsec_/)
    expect(await secret.textContent()).not.toBe(shown)
    await page.getByRole("button", { name: "Done" }).click()
    await card.getByRole("button", { name: "Delete", exact: true }).click()
    await card.getByRole("button", { name: "Yes, delete" }).click()
    await page.getByText("No endpoints yet.").waitFor()
    expect((await call("GET", "/api/webhooks/endpoints")).body.endpoints).toEqual([])
  }, 60_000)

  it("fits 390 px: the campaign's sections and the call drawer, without sideways scrolling", async () => {
    await page.setViewportSize({ width: 390, height: 844 })
    await choose(workflow.name)
    for (const name of ["Overview", "Audience", "Rule book", "Consent", "Settings", "Results"]) {
      await tab(name).click()
      const overflow = Number(await page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))
      expect(overflow, `${name} at 390 px`).toBeLessThanOrEqual(0)
    }
    await tab("Rule book").click()
    await toTop(detail())
    await screenshot(page, "campaigns-390")
    // The tabs move with the arrow keys.
    await tab("Results").focus()
    await page.keyboard.press("ArrowLeft")
    expect(await tab("Settings").getAttribute("aria-selected")).toBe("true")
    await tab("Results").click()
    const runs = detail().getByRole("region", { name: "Runs and results" })
    await runs.getByRole("button", { name: "Show results" }).first().click()
    await runs.getByRole("button", { name: "Open the call to Bo Park" }).click()
    const drawer = page.getByRole("dialog", { name: `Call to Bo Park (${DECLINES})` })
    await drawer.getByRole("list", { name: "Turns" }).waitFor()
    const box = await drawer.boundingBox()
    expect(box!.width).toBeLessThanOrEqual(390)
    await drawer.getByRole("button", { name: "Close" }).click()
    await drawer.waitFor({ state: "detached" })
    await page.setViewportSize({ width: 1280, height: 900 })
    expect(problems).toEqual([])
  }, 45_000)
})
