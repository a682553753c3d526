// Team roles in Chromium: one workspace with an owner, an admin, a supervisor and an analyst, the
// extra members made the real way (invited, the link read from the outbox; the supervisor opens it
// in the browser and chooses a password there). The owner invites and changes a role from the
// Members page; each role sees only what it may do (the analyst no create, run, edit or delete
// control, the supervisor Approve/Deny and Pause but nothing to set up); an admin removes a member,
// whose next page load is the sign-in page, and reads it all in the audit log; the owner hands
// ownership on. Each step checks the page and what GET /members (or the database) then holds.
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { api, type Session, uniqueEmail } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { assertBrowser, eventually, launchChromium, screenshot, skipBrowser, watchProblems } from "./browser.support.js"

const STEP_MS = 15_000
const PASSWORD = "supervisor horse battery staple"
const PHONES = ["+12025550107", "+12025550117"] as const
/** Buttons (by their text) that set up, run, change or delete: none is an analyst's to press. */
const NOT_FOR_ANALYSTS = new RegExp(
  "^(Create workflow|Run|Pause|Retire|Save changes|Upload audience|Attest consent|Save opening line|Approve|Deny|" +
    "Top up|Save autocharge|Add number|Import CSV|Remove|Revoke|Send invitation|Resend|Make owner|Save name|" +
    "Add endpoint|Send test ping|New signing secret|Turn off|Delete|Retry)\\b",
)

type Member = { user_id: number; email: string; full_name: string | null; role: string }
type Team = { members: Member[]; invitations: { email: string; role: string; status: string }[] }

describe.skipIf(skipBrowser)("members and roles in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let a: ReturnType<typeof api>
  let owner: Session
  let admin: Session
  let analyst: Session
  const supervisorEmail = uniqueEmail("supervisor")
  let workflowName = ""
  const pages: Partial<Record<"owner" | "admin" | "supervisor" | "analyst", Page>> = {}
  const problems: Array<{ who: string; list: string[] }> = []

  const at = (hash: string) => `${srv.url}/console#/${hash}`
  const heading = (p: Page, name: string | RegExp) => p.getByRole("heading", { level: 1, name }).waitFor()
  const team = async (): Promise<Team> =>
    (await (await a.call("GET", "/members", { token: owner.token })).json()) as Team
  const roleOf = async (email: string) => (await team()).members.find((m) => m.email === email)?.role
  /** The texts of the buttons in the page's content (the shell's Sign out is outside it). */
  const buttons = (p: Page) =>
    p
      .locator("main")
      .getByRole("button")
      .evaluateAll((bs) => bs.map((b) => (b.textContent ?? "").trim()))

  /** A fresh browser profile for one person; signed in when given their session's cookie. */
  async function newPage(who: string, session?: Session): Promise<Page> {
    const context = await browser.newContext({
      viewport: { width: 1280, height: 800 },
      locale: "en-US",
      timezoneId: "UTC",
    })
    context.setDefaultTimeout(STEP_MS)
    if (session !== undefined)
      await context.addCookies([
        { name: "svc_session", value: session.cookie.slice("svc_session=".length), url: srv.url },
      ])
    const page = await context.newPage()
    problems.push({ who, list: watchProblems(page, srv.url) })
    return page
  }

  async function open(p: Page, link: string, name: string) {
    await p.getByRole("navigation", { name: "Console" }).getByRole("link", { name: link, exact: true }).click()
    await heading(p, name)
  }

  /** Opens the workflow from the Campaigns page's lists. */
  async function chooseWorkflow(p: Page) {
    await open(p, "Campaigns", "Campaigns")
    await p.getByRole("button", { name: workflowName, exact: true }).click()
    await p.getByRole("article").getByRole("heading", { level: 2 }).waitFor()
    await p.getByRole("heading", { name: "Runs", exact: true }).waitFor()
  }

  /** The texts of the buttons in every section of the chosen workflow (each section opened in turn). */
  async function sectionButtons(p: Page): Promise<string[]> {
    const all: string[] = []
    for (const name of ["Overview", "Audience", "Rule book", "Consent", "Settings", "Results"]) {
      await p.getByRole("article").getByRole("tab", { name, exact: true }).click()
      all.push(...(await buttons(p)))
    }
    return all
  }

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser] = await Promise.all([startTestServer(), launchChromium()])
    a = api(srv)
    owner = await a.signup({ full_name: "Olive Owner" })
    admin = await a.addMember(owner, "admin")
    analyst = await a.addMember(owner, "analyst")
    const as = (method: string, path: string, body: unknown) => a.call(method, path, { token: owner.token, body })
    const wf = (await (await as("POST", "/api/workflows", { nl_prompt: "Win back lapsed gym members." })).json()) as {
      id: number
      name: string
    }
    workflowName = wf.name
    expect((await as("POST", "/dnc/add", { phone_e164: "+12025550199", reason: "asked" })).status).toBe(200)
    await a.createKey(owner, { name: "reporting", scope: "read" })
    // Two concessions waiting for a decision, as a held call writes them (no run dials here).
    const [{ currency }] = await srv.sql<[{ currency: string }]>`
      select currency from wallets where tenant_id = ${owner.tenantId}`
    for (const phone of PHONES)
      await srv.sql`insert into approvals (tenant_id, workflow_id, target_phone, proposed_action,
          proposed_value_minor, currency, rationale, context, expires_at)
        values (${owner.tenantId}, ${wf.id}, ${phone}, 'concession', 1500, ${currency}, 'Asked for a discount',
          ${srv.sql.json({ transcript: ["callee: Any discount?", "agent: Let me check."] })},
          now() + interval '30 minutes')`
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("the owner invites a supervisor from the Members page, and the invitation is listed", async () => {
    const p = (pages.owner = await newPage("owner", owner))
    await p.goto(at("members"))
    await heading(p, "Members")
    // The owner's own row says owner, with no role to pick and no way to leave.
    const mine = p
      .getByRole("table", { name: "The workspace's members" })
      .getByRole("row")
      .filter({ hasText: owner.email })
    await expect.poll(() => mine.textContent()).toContain("owner")
    expect(await mine.getByRole("combobox").count()).toBe(0)
    expect(await p.getByRole("button", { name: "Leave workspace" }).count()).toBe(0)

    await p.getByLabel("Email").fill(supervisorEmail)
    await p.getByLabel("Role", { exact: true }).selectOption("supervisor")
    await p.getByRole("button", { name: "Send invitation" }).click()
    await p
      .getByRole("status")
      .filter({ hasText: `Invitation sent to ${supervisorEmail}` })
      .waitFor()
    await p
      .getByRole("table", { name: "Open invitations" })
      .getByRole("row")
      .filter({ hasText: supervisorEmail })
      .waitFor()
    expect((await team()).invitations).toContainEqual(
      expect.objectContaining({ email: supervisorEmail, role: "supervisor", status: "pending" }),
    )
    // Tall enough for the picture to show the open invitation under the team.
    await p.setViewportSize({ width: 1280, height: 1000 })
    await screenshot(p, "members")
    await p.setViewportSize({ width: 1280, height: 800 })

    // A refusal in words, not its code.
    await p.getByLabel("Email").fill(analyst.email)
    await p.getByRole("button", { name: "Send invitation" }).click()
    const alert = p.getByRole("alert").filter({ hasText: "already a member" })
    await alert.waitFor()
    expect(await alert.textContent()).not.toMatch(/[A-Z]{3,}_[A-Z]/)
  })

  it("the supervisor opens the emailed link signed out, chooses a password there and is signed in", async () => {
    const p = (pages.supervisor = await newPage("supervisor"))
    // A link that was never issued says so in words.
    await p.goto(`${srv.url}/console/#/join?token=not-a-real-invitation`)
    await heading(p, "Invitation not valid")
    await p.getByRole("alert").filter({ hasText: "cannot be used" }).waitFor()

    const link = readOutbox(srv.config.outboxFile)
      .filter((m) => m.kind === "invitation" && m.to === supervisorEmail)
      .at(-1)?.links[0]
    expect(link).toMatch(/\/console\/#\/join\?token=/)
    await p.goto(new URL(link!, srv.url).toString())
    await heading(p, /^Join .+ as a supervisor$/)
    expect(await p.getByLabel("Email").inputValue()).toBe(supervisorEmail)
    await p.getByLabel("Password").fill("too short")
    await p.getByRole("button", { name: "Join workspace" }).click()
    await p.getByText("Choose a password of at least 10 characters.").waitFor()
    await p.getByLabel("Name (optional)").fill("Sam Supervisor")
    await p.getByLabel("Password").fill(PASSWORD)
    await screenshot(p, "join")
    await p.getByRole("button", { name: "Join workspace" }).click()
    await heading(p, "Campaigns")
    // The used link's token is gone from the address bar; the session is the httpOnly cookie.
    expect(new URL(p.url()).hash).toBe("#/campaigns")
    expect((await p.context().cookies()).find((c) => c.name === "svc_session")?.httpOnly).toBe(true)
    const joined = (await team()).members.find((m) => m.email === supervisorEmail)
    expect(joined).toMatchObject({ role: "supervisor", full_name: "Sam Supervisor" })
  })

  it("the supervisor decides approvals and may pause, but sets nothing up", async () => {
    const p = pages.supervisor!
    expect(await p.getByRole("button", { name: "Create workflow" }).count()).toBe(0)
    await chooseWorkflow(p)
    const detail = p.getByRole("article")
    expect(await detail.getByRole("button", { name: "Pause", exact: true }).count()).toBe(1)
    const offered = await sectionButtons(p)
    for (const name of ["Run", "Retire", "Save changes", "Upload audience", "Attest consent", "Save opening line"])
      expect(offered, name).not.toContain(name)
    expect(await p.getByRole("link", { name: "Audit log" }).count()).toBe(0)

    await open(p, "Approvals", "Approvals")
    const card = p.getByRole("article", { name: `Concession for ${PHONES[0]}` })
    await card.getByRole("button", { name: "Approve" }).waitFor()
    await card.getByRole("button", { name: "Deny" }).click()
    await card.waitFor({ state: "detached" })
    await eventually(
      async () =>
        (await srv.sql<[{ status: string }]>`select status from approvals where target_phone = ${PHONES[0]}`)[0],
      (r) => r.status === "denied",
    )

    await open(p, "Wallet", "Wallet")
    await p.getByText("Owners and admins top up").waitFor()
    expect(await p.getByRole("button", { name: /^(Top up|Save autocharge)$/ }).count()).toBe(0)

    await open(p, "Settings", "Settings")
    await p.getByRole("button", { name: "Create key" }).waitFor()
    expect(await p.getByLabel("Scope").locator("option").allTextContents()).toEqual(["read"])
    expect(await p.getByRole("button", { name: /^(Add number|Import CSV|Remove|Revoke)\b/ }).count()).toBe(0)

    await open(p, "Members", "Members")
    await p.getByRole("button", { name: "Leave workspace" }).waitFor()
    expect(await p.getByRole("button", { name: /^(Send invitation|Remove|Make owner|Resend|Revoke)\b/ }).count()).toBe(
      0,
    )
    expect(await p.locator("main").getByRole("combobox").count()).toBe(0)
  })

  it("the analyst signs in and sees no create, run, edit or delete control on any page", async () => {
    const p = (pages.analyst = await newPage("analyst"))
    await p.goto(at("campaigns"))
    await heading(p, "Sign in")
    await p.getByLabel("Email").fill(analyst.email)
    await p.getByLabel("Password").fill(analyst.password)
    await p.getByRole("button", { name: "Sign in", exact: true }).click()
    await heading(p, "Campaigns")
    expect(await p.getByRole("heading", { name: "New workflow" }).count()).toBe(0)
    await chooseWorkflow(p)
    const offered = await sectionButtons(p)
    // What an analyst may do is there (choosing a workflow, hearing its opening line); the rest is not.
    expect(offered).toEqual(expect.arrayContaining([workflowName, "Preview opening"]))
    expect(offered.filter((b) => NOT_FOR_ANALYSTS.test(b))).toEqual([])

    for (const [link, name, ready] of [
      ["Approvals", "Approvals", "Supervisors, admins and the owner decide approvals."],
      ["Wallet", "Wallet", "Owners and admins top up"],
      ["Settings", "Settings", "+12025550199"],
      ["Live", "Live calls", "No calls in flight"],
      ["Webhooks", "Webhooks", "No endpoints yet."],
      ["Members", "Members", owner.email],
    ] as const) {
      await open(p, link, name)
      await p.locator("main").getByText(ready).first().waitFor()
      expect(
        (await buttons(p)).filter((b) => NOT_FOR_ANALYSTS.test(b)),
        name,
      ).toEqual([])
    }
    // The Members page: no invitation form, no role to change; leaving is the analyst's own choice.
    expect(await p.getByRole("heading", { name: "Invite someone" }).count()).toBe(0)
    expect(await p.locator("main").getByRole("combobox").count()).toBe(0)
    expect(await p.getByRole("button", { name: "Leave workspace" }).count()).toBe(1)
    // No audit log in the navigation, nor by its address.
    expect(await p.getByRole("link", { name: "Audit log" }).count()).toBe(0)
    await p.goto(at("audit"))
    await heading(p, "Campaigns")
  })

  it("the owner changes a role from the page: GET /members and the member's next load have it", async () => {
    const p = pages.owner!
    await p.reload()
    await heading(p, "Members")
    await p.getByLabel(`Role of ${analyst.email}`).selectOption("supervisor")
    await p
      .getByRole("status")
      .filter({ hasText: `${analyst.email} is now a supervisor` })
      .waitFor()
    expect(await roleOf(analyst.email)).toBe("supervisor")

    const q = pages.analyst!
    await q.goto(at("approvals"))
    await q.reload()
    await heading(q, "Approvals")
    await q
      .getByRole("article", { name: `Concession for ${PHONES[1]}` })
      .getByRole("button", { name: "Approve" })
      .waitFor()
  })

  it("an admin removes a member; the member's next page load is the sign-in page; the audit log says so", async () => {
    const p = (pages.admin = await newPage("admin", admin))
    await p.goto(at("members"))
    await heading(p, "Members")
    await p.getByRole("button", { name: `Remove ${analyst.email}` }).click()
    await p.getByRole("button", { name: "Yes, remove" }).click()
    await p
      .getByRole("status")
      .filter({ hasText: `${analyst.email} was removed` })
      .waitFor()
    expect((await team()).members.map((m) => m.email)).not.toContain(analyst.email)

    const q = pages.analyst!
    await q.reload()
    await heading(q, "Sign in")

    await open(p, "Audit log", "Audit log")
    const rows = p.getByRole("table", { name: "Audit log, newest first" }).getByRole("row")
    // Newest first: the removal, then the role change; the owner's invitation further down.
    await expect.poll(() => rows.nth(1).textContent()).toContain(`removed ${analyst.email} (supervisor)`)
    expect(await rows.nth(1).textContent()).toContain(admin.email)
    expect(await rows.nth(2).textContent()).toContain(`changed ${analyst.email}'s role from analyst to supervisor`)
    const invited = rows.filter({ hasText: `invited ${supervisorEmail} as a supervisor` })
    expect(await invited.textContent()).toContain(owner.email)
    expect(await invited.textContent()).toContain("127.0.0.1")
    await screenshot(p, "audit")
  })

  it("the owner makes the admin the owner, and is an admin from then on", async () => {
    const p = pages.owner!
    await p.reload()
    await heading(p, "Members")
    await p.getByRole("button", { name: `Make owner ${admin.email}` }).click()
    await p.getByRole("button", { name: "Yes, make owner" }).click()
    await p
      .getByRole("status")
      .filter({ hasText: `${admin.email} is now the owner` })
      .waitFor()
    expect(await roleOf(admin.email)).toBe("owner")
    expect(await roleOf(owner.email)).toBe("admin")
    // The page read the new role: no more transfers offered, and the former owner may leave.
    await p.getByRole("button", { name: "Leave workspace" }).waitFor()
    expect(await p.getByRole("button", { name: /^Make owner/ }).count()).toBe(0)
    await expect.poll(() => p.getByTestId("role").textContent()).toContain("admin")
  })

  it("a member who leaves is taken to sign-in, and nothing on any page went wrong", async () => {
    const p = pages.supervisor!
    await open(p, "Members", "Members")
    await p.getByRole("button", { name: "Leave workspace" }).click()
    await p.getByRole("button", { name: "Yes, leave" }).click()
    await heading(p, "Sign in")
    expect(await roleOf(supervisorEmail)).toBeUndefined()
    for (const { who, list } of problems) expect(list, who).toEqual([])
  })
})
