// A supervisor's minutes that matter, in Chromium on the simulator (issue 34, items 4–6): a real run
// whose callees ask for discounts. Live marks the held call as on hold for a decision, with its time
// left, the callee's and campaign's names and Approve/Deny in its row; the Approvals tab's count
// arrives without a reload (pushed); on Approvals the held card is first, its Approve within a 390 px
// screen without scrolling, and approving it at another amount says what it did, and the callee hears
// that amount; a card whose hold ran out moves to "After the call", says what a late decision will do,
// and the result then shows it; the Decided tab names who decided what; the campaign's overview
// counts its outcomes as they come, without Refresh, and ends in a finished state.
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { assertBrowser, eventually, launchChromium, screenshot, skipBrowser, watchProblems } from "./browser.support.js"

// Calls run 100× fast, but a callee holds 15 s of real time (1,500 s × 0.01): long enough to decide one
// call on the card while the other's hold runs out. The prompt's 30-minute calls (18 s here) outlast it.
const ENV = { ...FAST_RUNTIME_ENV, APPROVAL_HOLD_MS: "1500000" }
const PROMPT =
  "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked. " +
  "Keep each call under 30 minutes."
const STEP_MS = 15_000
/** Well under the Approvals page's fallback poll (30 s): only a pushed event can be this quick. */
const PUSH_MS = 5_000
/** 7 asks for a discount (the simulator's last-digit personas); 3 agrees at once. */
const DEE = { phone: "+12025550107", name: "Dee Marsh" }
const BEA = { phone: "+12025550127", name: "Bea Lund" }
const ANN = { phone: "+12025550143", name: "Ann Lee" }

type Json = Record<string, any>

describe.skipIf(skipBrowser)("approvals, live calls and progress in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let owner: Session
  let supervisor: Session
  /** The campaign's overview, open (never reloaded) from the Run click to the finished state. */
  let board: Page
  /** Where the supervisor works: Live, then Approvals. */
  let desk: Page
  const problems: string[][] = []
  const contexts: BrowserContext[] = []
  let workflow = { id: 0, name: "" }
  let runId = 0

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await api(srv).call(method, path, { token: owner.token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }
  async function newPage(session: Session, width: number, height: number): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height }, locale: "en-US", timezoneId: "UTC" })
    context.setDefaultTimeout(STEP_MS)
    contexts.push(context)
    await context.addCookies([
      { name: "svc_session", value: session.cookie.slice("svc_session=".length), url: srv.url },
    ])
    const page = await context.newPage()
    problems.push(watchProblems(page, srv.url))
    return page
  }
  const nav = (p: Page, link: string) =>
    p.getByRole("navigation", { name: "Console" }).getByRole("link", { name: link, exact: true })
  async function open(p: Page, link: string, heading: string) {
    await nav(p, link).click()
    await p.getByRole("heading", { level: 1, name: heading }).waitFor()
  }
  const card = (p: Page, who: { phone: string; name: string }) =>
    p.getByRole("article", { name: `Concession for ${who.name} (${who.phone})` })
  const approvalOf = async (phone: string): Promise<Json> =>
    (
      await eventually(
        async () => (await call("GET", `/api/approvals?workflow_id=${workflow.id}`)).body.approvals as Json[],
        (list) => list.some((a) => a.target_phone === phone),
        20_000,
      )
    ).find((a) => a.target_phone === phone)!

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser] = await Promise.all([startTestServer({ env: ENV }), launchChromium()])
    const a = api(srv)
    owner = await a.signup({ country: "US", full_name: "Olive Owner" })
    supervisor = await a.addMember(owner, "supervisor")
    const intent = (await call("POST", "/billing/topup", { amount_minor: 1_000_000 })).body
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const made = await call("POST", "/api/workflows", { nl_prompt: PROMPT })
    expect(made.status).toBe(201)
    workflow = { id: made.body.id, name: made.body.name }
    expect(made.body.rule_book.concession_policy.cap_minor).toBe(2000)
    expect(made.body.rule_book.max_call_seconds).toBe(1800)
    const rows = [DEE, BEA, ANN]
    expect((await call("POST", `/api/workflows/${workflow.id}/audience`, { rows })).status).toBe(200)
    const consent = { consent_attestation_text: "Members opted in to calls when they joined." }
    expect((await call("PUT", `/api/workflows/${workflow.id}/compliance`, consent)).status).toBe(200)
    // Each its own context: a page in front of another in one window could be throttled as hidden.
    ;[board, desk] = await Promise.all([newPage(owner, 1280, 900), newPage(owner, 1280, 900)])
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("runs the campaign from its overview, whose progress moves without Refresh", async () => {
    await board.goto(`${srv.url}/console#/campaigns`)
    await board.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    await board.getByRole("button", { name: workflow.name, exact: true }).click()
    const detail = board.getByRole("article")
    await detail.getByRole("heading", { level: 2 }).filter({ hasText: workflow.name }).waitFor()
    await detail.getByRole("button", { name: "Run", exact: true }).click()
    const progress = board.getByTestId("run-progress")
    await progress.getByRole("heading", { name: /Running — \d of 3 done$/ }).waitFor()
    // A run in progress keeps Run off, and says why.
    await detail.getByTestId("run-blocked").filter({ hasText: "A run is in progress." }).waitFor()
    expect(await detail.getByRole("button", { name: "Run", exact: true }).isDisabled()).toBe(true)
    runId = (await call("GET", `/api/workflows/${workflow.id}/runs`)).body.runs[0].id
    // Ann agrees at once: the bar and the counts move by themselves.
    await progress.getByRole("heading", { name: /Running — [1-2] of 3 done$/ }).waitFor()
    await progress.getByRole("list", { name: "Outcomes" }).getByText("Agreed: 1").waitFor()
    expect(await progress.locator("progress").getAttribute("value")).not.toBe("0")
  }, 30_000)

  it("counts the pending approvals on the Approvals tab without a reload, on every page", async () => {
    // The overview's page has not been reloaded since before anyone asked.
    const count = nav(board, "Approvals").getByTestId("pending-count")
    await expect.poll(() => count.textContent(), { timeout: 20_000 }).toBe("2")
    // The count describes the tab; its name stays "Approvals".
    await board
      .getByRole("navigation", { name: "Console" })
      .getByRole("link", { name: "Approvals", exact: true, description: "2 waiting for a decision" })
      .waitFor()
    await desk.goto(`${srv.url}/console#/wallet`)
    await desk.getByRole("heading", { level: 1, name: "Wallet" }).waitFor()
    await expect.poll(() => nav(desk, "Approvals").getByTestId("pending-count").textContent()).toBe("2")
  }, 30_000)

  it("marks the held calls on Live, by name, with the time left and Approve/Deny in the row", async () => {
    await open(desk, "Live", "Live calls")
    const calls = desk.getByRole("region", { name: "Calls in flight" })
    // The call's own row (the one with its Watch button), not the decision's row under it.
    const row = calls.getByRole("row").filter({ has: desk.getByRole("button", { name: `Watch ${DEE.phone}` }) })
    await row.getByTestId("on-hold").filter({ hasText: "On hold — waiting for you" }).waitFor()
    await row
      .getByRole("timer")
      .filter({ hasText: /^0:\d\d left$/ })
      .waitFor()
    expect(await row.textContent()).toContain(workflow.name)
    expect(await row.textContent()).toContain(DEE.phone)
    const inline = calls.getByRole("region", { name: `Decision for ${DEE.name} (${DEE.phone})` })
    await inline.getByRole("button", { name: "Approve", exact: true }).waitFor()
    await inline.getByRole("button", { name: "Deny", exact: true }).waitFor()
    expect(await inline.getByLabel("Amount to approve (USD)").inputValue()).toBe("10.00")
    await desk.getByTestId("held-count").filter({ hasText: "2 callees are on hold" }).waitFor()
    await screenshot(desk, "live-on-hold")
  }, 30_000)

  it("at 390 px shows the first held card's Approve without scrolling", async () => {
    const phone = await newPage(supervisor, 390, 844)
    await phone.goto(`${srv.url}/console#/approvals`)
    await phone.getByRole("heading", { level: 2, name: "On hold now" }).waitFor()
    const first = phone.getByRole("article").first()
    const approve = first.getByRole("button", { name: "Approve", exact: true })
    await approve.waitFor()
    expect(await phone.evaluate("window.scrollY")).toBe(0)
    const box = (await approve.boundingBox())!
    expect(box.y + box.height).toBeLessThanOrEqual(844)
    expect(Number(await phone.evaluate("document.documentElement.scrollWidth - window.innerWidth"))).toBe(0)
    await screenshot(phone, "approvals-390")
    await phone.context().close()
  }, 30_000)

  it("approves a held discount at another amount on its card: the effect is said, the callee hears it", async () => {
    await open(desk, "Approvals", "Approvals")
    const held = desk.getByRole("region", { name: "On hold now" })
    const dee = card(desk, DEE)
    await held.getByRole("article", { name: `Concession for ${DEE.name} (${DEE.phone})` }).waitFor()
    await dee.getByRole("timer").waitFor()
    await dee.getByText("at most $20.00 (the cap)").waitFor()
    await screenshot(desk, "approvals-queue")
    const amount = dee.getByLabel("Amount to approve (USD)")
    // Past the cap: refused beside the field, nothing sent.
    await amount.fill("25")
    await dee.getByRole("button", { name: "Approve", exact: true }).click()
    await dee.getByText("At most $20.00, the rule book's cap.").waitFor()
    expect((await approvalOf(DEE.phone)).status).toBe("pending")
    await amount.fill("12.34")
    await dee.getByLabel("Note").fill("Loyal member.")
    await dee.getByRole("button", { name: "Approve", exact: true }).click()
    await dee.waitFor({ state: "detached" })
    await desk
      .getByTestId("decision-effect")
      .filter({ hasText: "The callee is still on the line and will hear the approval of $12.34 now." })
      .waitFor()
    const ap = await approvalOf(DEE.phone)
    expect(ap).toMatchObject({ status: "approved", approved_value_minor: 1234, decided_phase: "on_hold" })
    // The held call resumes: the agent's next turn says the approved amount.
    await eventually(
      () => srv.sql<{ text: string }[]>`select text from turns where call_id = ${ap.call_id} and speaker = 'agent'`,
      (turns) => turns.some((t) => t.text.includes("$12.34")),
    )
    await expect.poll(() => nav(desk, "Approvals").getByTestId("pending-count").textContent()).toBe("1")
  }, 30_000)

  it("moves a card whose hold ran out to After the call, says what a late decision will do, then does it", async () => {
    const after = desk.getByRole("region", { name: "After the call" })
    const bea = after.getByRole("article", { name: `Concession for ${BEA.name} (${BEA.phone})` })
    await bea.waitFor({ timeout: 25_000 })
    await bea.getByText("Call ended").waitFor()
    await bea
      .getByText(
        "The call has ended. Approving records the agreed $10.00 on the result; denying records the discount " +
          "as denied. No one is called.",
      )
      .waitFor()
    // The call has ended owing the decision.
    await eventually(
      async () => (await call("GET", `/api/runs/${runId}/results`)).body.results as Json[],
      (rs) => rs.find((r) => r.phone === BEA.phone)?.outcome === "pending_approval",
      20_000,
    )
    await screenshot(desk, "approvals-after-call")
    await bea.getByRole("button", { name: "Approve: record $10.00 as agreed" }).click()
    const effect = "The call had ended: the result now records the agreed $10.00; no one is called."
    await desk.getByTestId("decision-effect").filter({ hasText: effect }).waitFor()
    const result = ((await call("GET", `/api/runs/${runId}/results`)).body.results as Json[]).find(
      (r) => r.phone === BEA.phone,
    )
    expect(result).toMatchObject({ outcome: "agreed_after_call", decision_effect: effect })
    await nav(desk, "Approvals").getByTestId("pending-count").waitFor({ state: "detached", timeout: PUSH_MS })
  }, 45_000)

  it("lists both decisions on the Decided tab: who decided what, when, and what it did", async () => {
    await desk.getByRole("tab", { name: "Decided", exact: true }).click()
    const table = desk.getByRole("region", { name: "Decided approvals, newest first" })
    const dee = table.getByRole("row").filter({ hasText: DEE.name })
    const bea = table.getByRole("row").filter({ hasText: BEA.name })
    await expect.poll(() => dee.textContent()).toContain("Approved at $12.34")
    expect(await dee.textContent()).toContain(`Olive Owner (${owner.email.toLowerCase()})`)
    expect(await dee.textContent()).toContain("while the callee held")
    expect(await dee.textContent()).toContain("Loyal member.")
    expect(await bea.textContent()).toContain("after the call had ended")
    expect(await bea.textContent()).toContain("the result now records the agreed $10.00")
    await screenshot(desk, "approvals-decided")
  }, 30_000)

  it("ends the campaign's overview in a finished state with the outcomes, and Run on again", async () => {
    // The page open since the Run click: finished, and the late decision counted, without Refresh.
    const progress = board.getByTestId("run-progress")
    await progress.getByRole("heading", { name: /Finished — 3 of 3 called$/ }).waitFor({ timeout: 30_000 })
    const outcomes = progress.getByRole("list", { name: "Outcomes" })
    for (const line of ["Agreed: 1", "Agreed with a discount: 1", "Discount approved after the call: 1"])
      await outcomes.getByText(line).waitFor()
    expect(await progress.textContent()).toMatch(/Spent\$\d+\.\d\d/)
    await expect.poll(() => board.getByRole("button", { name: "Run", exact: true }).isEnabled()).toBe(true)
    expect(await board.getByTestId("run-blocked").count()).toBe(0)
    await progress.evaluate((el) => el.scrollIntoView({ block: "start" }))
    await screenshot(board, "campaign-progress")
    expect(problems.flat()).toEqual([])
  }, 45_000)
})
