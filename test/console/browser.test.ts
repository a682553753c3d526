// The operator console in a real browser (Debian's Chromium through playwright-core), as one
// supervisor's morning: verify the email from the outbox, sign in, fund the wallet with the stub
// gateway, create a campaign, upload its audience, attest consent and run it on the simulator,
// watch its turns arrive live, approve the discount the number ending 7 asks for and see the call
// resume in the transcript, deny the callback the number ending 8 asks for, create and revoke an
// API key, and read the reports. Each step asserts what the page shows and what the database
// holds; every page is photographed (the README's pictures: UPDATE_SCREENSHOTS=1 writes them to
// test/console/screenshots/). Selection is by role and accessible name (the names are listed at
// the top of console/main.tsx).
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { Effect } from "effect"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { TurnStreams } from "../../src/turns/TurnStreams.js"
import { FAST_RUNTIME_ENV, uniqueEmail } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { assertBrowser, eventually, launchChromium, screenshot, skipBrowser, watchProblems } from "./browser.support.js"

const PASSWORD = "correct horse battery staple"
/** 7 asks for a discount, 8 for a callback (the simulator's last-digit personas). */
const DISCOUNT = "+12025550107"
const CALLBACK = "+12025550118"
// The simulated calls run 20× fast, but a held call waits for the supervisor in real time: the
// hold and the call's length (both scaled by SIM_TIME_SCALE) must outlast the clicks between the
// ask and the decision on a busy machine: 100 s and 90 s here (the prompt asks for 30-minute calls).
const ENV = { ...FAST_RUNTIME_ENV, SIM_TIME_SCALE: "0.05", APPROVAL_HOLD_MS: "2000000" }
const STEP_MS = 15_000
/**
 * How soon an approval change must show on an open Approvals page: well under its fallback poll
 * (30 s), so only the pushed event (GET /api/approvals/stream) can bring it in time.
 */
const PUSH_MS = 5_000

let srv: TestServer
let browser: Browser
let context: BrowserContext
let page: Page
let problems: string[] = []
/** A second supervisor's Approvals page, open from before the run: it must follow the queue by itself. */
let queue: Page
let queueProblems: string[] = []
const email = uniqueEmail("console")
let tenantId = 0
let currency = "USD"
/** Money as the page writes it (the browser runs en-US). */
const shown = (minor: number) => new Intl.NumberFormat("en-US", { style: "currency", currency }).format(minor / 100)
let workflowId = 0

/** The page's own URL for a console route. */
const at = (hash: string) => `${srv.url}/console#/${hash}`

async function open(p: Page, link: string, heading: string) {
  await p.getByRole("navigation", { name: "Console" }).getByRole("link", { name: link, exact: true }).click()
  await p.getByRole("heading", { level: 1, name: heading }).waitFor()
}

describe.skipIf(skipBrowser)("the console in Chromium", () => {
  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser] = await Promise.all([startTestServer({ env: ENV }), launchChromium()])
    context = await browser.newContext({
      viewport: { width: 1280, height: 800 },
      locale: "en-US",
      timezoneId: "UTC",
      acceptDownloads: true,
    })
    context.setDefaultTimeout(STEP_MS)
    page = await context.newPage()
    problems = watchProblems(page, srv.url)
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("signs up, verifies the email through the outbox and signs in with a password", async () => {
    await page.goto(`${srv.url}/console`)
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    await screenshot(page, "signin")
    await page.getByRole("button", { name: "Create an account", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Create an account" }).waitFor()
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill(PASSWORD)
    await page.getByRole("button", { name: "Create account", exact: true }).click()
    await page.getByRole("status").filter({ hasText: "verification email" }).waitFor()
    const [user] = await srv.sql<[{ tenant_id: number; email_verified: boolean }]>`
      select tenant_id, email_verified from users where lower(email) = ${email}`
    expect(user.email_verified).toBe(false)
    tenantId = user.tenant_id
    ;[{ currency }] = await srv.sql<[{ currency: string }]>`select currency from wallets where tenant_id = ${tenantId}`

    // The mail simulator's outbox holds the link a person would click.
    const link = readOutbox(srv.config.outboxFile)
      .filter((m) => m.kind === "verify_email" && m.to === email)
      .at(-1)?.links[0]
    expect(link).toBeDefined()
    const verified = await page.goto(new URL(link!, srv.url).toString())
    expect(verified?.status()).toBe(200)
    const [after] = await srv.sql<[{ email_verified: boolean }]>`select email_verified from users
      where lower(email) = ${email}`
    expect(after.email_verified).toBe(true)

    await page.goto(`${srv.url}/console`)
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    // A wrong password is refused in words, and nothing is signed in.
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill("not the password at all")
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("alert").first().waitFor()
    expect((await context.cookies()).some((c) => c.name === "svc_session")).toBe(false)
    await page.getByLabel("Password").fill(PASSWORD)
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    const cookies = await context.cookies()
    expect(cookies.find((c) => c.name === "svc_session")?.httpOnly).toBe(true)
  }, 30_000)

  it("tops up the wallet through the stub gateway", async () => {
    await open(page, "Wallet", "Wallet")
    const balance = page.getByTestId("balance")
    await balance.waitFor()
    const before = await balance.textContent()
    const amount = page.getByLabel(`Amount (${currency})`)
    await amount.fill("twelve")
    await page.getByRole("button", { name: "Top up", exact: true }).click()
    await page.getByText("Enter an amount such as 25 or 25.50.").waitFor()
    await amount.fill("250")
    await page.getByRole("button", { name: "Top up", exact: true }).click()
    const stub = page.getByRole("region", { name: "Test payment" })
    await stub.waitFor()
    const [intent] = await srv.sql<[{ id: number; status: string; amount_minor: number }]>`
      select id, status, amount_minor::int from payment_intents where tenant_id = ${tenantId}`
    expect(intent).toMatchObject({ status: "pending", amount_minor: 25_000 })
    await expect.poll(() => stub.textContent()).toContain(`#${intent.id}`)
    await screenshot(page, "wallet-pending")
    await stub.getByRole("button", { name: "Complete payment" }).click()
    await page.getByRole("status").filter({ hasText: "completed" }).waitFor()
    await expect.poll(() => balance.textContent()).not.toBe(before)
    const [settled] = await srv.sql<[{ status: string }]>`select status from payment_intents where id = ${intent.id}`
    expect(settled.status).toBe("succeeded")
    const ledger = await srv.sql<{ amount_minor: number; balance_after_minor: number }[]>`
      select amount_minor::int, balance_after_minor::int from ledger_entries
      where tenant_id = ${tenantId} and amount_minor > 0 order by id`
    // Exactly one credit of the amount paid.
    expect(ledger.filter((e) => e.amount_minor === 25_000)).toHaveLength(1)
    const [wallet] = await srv.sql<[{ balance_minor: number }]>`select balance_minor::int from wallets
      where tenant_id = ${tenantId}`
    await expect.poll(() => balance.textContent()).toBe(shown(wallet.balance_minor))
    await page
      .getByRole("table")
      .getByText(`+${shown(25_000)}`)
      .waitFor()
    await screenshot(page, "wallet")
  }, 30_000)

  it("turns autocharge on once a top-up has saved a payment method", async () => {
    const form = page.getByRole("form", { name: "Autocharge" })
    await form.getByLabel("Autocharge enabled").check()
    await form.getByLabel(/^When the balance falls under/).fill("5")
    await form.getByLabel(/^Add/).fill("50")
    await form.getByRole("button", { name: "Save autocharge" }).click()
    // No saved method yet: the API's 409 is shown in words and nothing changes.
    await form.getByRole("alert").filter({ hasText: "saved payment method" }).waitFor()
    const autocharge = async () =>
      (
        await srv.sql<[{ on: boolean; threshold: number | null; amount: number | null }]>`
          select autocharge_enabled as on, autocharge_threshold_minor::int as threshold,
                 autocharge_amount_minor::int as amount from wallets where tenant_id = ${tenantId}`
      )[0]
    expect(await autocharge()).toEqual({ on: false, threshold: null, amount: null })

    await page.getByLabel(`Amount (${currency})`).fill("10")
    await page.getByLabel("Save the payment method for autocharge").check()
    await page.getByRole("button", { name: "Top up", exact: true }).click()
    await page.getByRole("region", { name: "Test payment" }).getByRole("button", { name: "Complete payment" }).click()
    await form.getByText("stub test method").waitFor()
    await form.getByRole("button", { name: "Save autocharge" }).click()
    await form.getByRole("status").filter({ hasText: "Autocharge saved." }).waitFor()
    expect(await autocharge()).toEqual({ on: true, threshold: 500, amount: 5000 })
  }, 30_000)

  it("creates a workflow, uploads its audience, attests consent and runs it", async () => {
    await open(page, "Campaigns", "Campaigns")
    await page
      .getByLabel("Prompt")
      .fill("Call members whose gym membership lapsed; offer up to $20 off to rejoin. Keep each call under 30 minutes.")
    await page.getByRole("button", { name: "Create workflow" }).click()
    const [wf] = await eventually(
      () => srv.sql<{ id: number }[]>`select id from workflows where tenant_id = ${tenantId}`,
      (rows) => rows.length === 1,
    )
    workflowId = wf!.id
    // The held calls must not run out of time while the supervisor clicks (see ENV).
    const [book] = await srv.sql<[{ max: number }]>`select (b.body->>'max_call_seconds')::int as max
      from rule_books b join workflows w on w.rule_book_id = b.id where w.id = ${workflowId}`
    expect(book.max).toBe(1800)
    const csv = `phone,name\n${DISCOUNT},Dee\n${CALLBACK},Cal\nnot-a-number,Nobody\n`
    const detail = page.getByRole("article")
    await detail.getByRole("tab", { name: "Audience", exact: true }).click()
    await page
      .getByLabel("Audience CSV")
      .setInputFiles({ name: "audience.csv", mimeType: "text/csv", buffer: Buffer.from(csv) })
    await page.getByRole("button", { name: "Upload audience" }).click()
    await page
      .getByRole("status")
      .getByText(/Accepted 2, rejected 1/)
      .waitFor()
    const targets = await srv.sql<{ phone_e164: string }[]>`select phone_e164 from audience_targets
      where workflow_id = ${workflowId} order by phone_e164`
    expect(targets.map((t) => t.phone_e164)).toEqual([DISCOUNT, CALLBACK])
    // Consent starts empty: the statement is the operator's own, and confirmed before it is saved.
    await detail.getByRole("tab", { name: "Consent", exact: true }).click()
    expect(await page.getByLabel("Consent statement").inputValue()).toBe("")
    await page.getByLabel("Consent statement").fill("Every member opted in to calls when they joined.")
    await page.getByRole("checkbox", { name: /I confirm every number in this audience gave consent/ }).check()
    await page.getByRole("button", { name: "Attest consent" }).click()
    await page.getByText(`Consent attested by ${email}`, { exact: false }).waitFor()
    await eventually(
      () => srv.sql<{ n: number }[]>`select count(*)::int as n from workflows
        where id = ${workflowId} and compliance ? 'consent_attested_at'`,
      (r) => r[0]!.n === 1,
    )
    await detail.getByRole("tab", { name: "Overview", exact: true }).click()
    await detail.evaluate((el) => el.scrollIntoView({ block: "start" }))
    await screenshot(page, "campaigns")
    // Another supervisor has the Approvals page open before anything is asked.
    queue = await context.newPage()
    queueProblems = watchProblems(queue, srv.url)
    await queue.goto(at("approvals"))
    await queue.getByText("0 waiting for a decision.").waitFor()
    await page.getByRole("button", { name: "Run", exact: true }).click()
    await eventually(
      () => srv.sql<{ n: number }[]>`select count(*)::int as n from runs where workflow_id = ${workflowId}`,
      (r) => r[0]!.n === 1,
    )
  }, 45_000)

  it("watches turns arrive live, and sees the approved discount resume the call", async () => {
    // Both asks are held until someone decides.
    await eventually(
      () => srv.sql<{ n: number }[]>`select count(*)::int as n from approvals
        where tenant_id = ${tenantId} and status = 'pending'`,
      (r) => r[0]!.n === 2,
      30_000,
    )
    // The queue open since before the run shows both proposals without a reload, pushed to it.
    for (const phone of [DISCOUNT, CALLBACK])
      await queue.getByRole("article", { name: new RegExp(`\\(\\${phone}\\)$`) }).waitFor({ timeout: PUSH_MS })
    await queue.getByText("2 waiting for a decision.").waitFor({ timeout: PUSH_MS })

    await open(page, "Live", "Live calls")
    // Watch the discount call: its transcript streams in.
    await page.getByRole("button", { name: `Watch ${DISCOUNT}` }).click()
    const transcript = page
      .getByRole("region", { name: `Transcript of the call to ${DISCOUNT}` })
      .getByRole("list", { name: "Turns" })
    await transcript
      .getByText(/discount/i)
      .first()
      .waitFor()
    const turnsBefore = await transcript.getByRole("listitem").count()
    expect(turnsBefore).toBeGreaterThan(1)
    await screenshot(page, "live-held")

    // The stream drops and the browser gives up on it (its reconnect is refused): the column says
    // so and offers Reconnect, which resumes after the highest seq shown, with nothing twice.
    const column = page.getByRole("region", { name: `Transcript of the call to ${DISCOUNT}` })
    const [held] = await srv.sql<[{ seq: number }]>`select max(t.seq)::int as seq from turns t
      join calls c on c.id = t.call_id where c.tenant_id = ${tenantId} and c.phone_e164 = ${DISCOUNT}`
    expect(await transcript.getByRole("listitem").count()).toBe(turnsBefore)
    await page.route("**/turns/stream**", (r) => r.fulfill({ status: 204 }))
    await srv.running.runtime.runPromise(Effect.map(TurnStreams, (hub) => hub.resync()))
    const reconnect = column.getByRole("button", { name: "Reconnect" })
    await reconnect.waitFor()
    await page.unroute("**/turns/stream**")
    const reopened = page.waitForRequest((r) => r.url().includes("/turns/stream"))
    await reconnect.click()
    expect(new URL((await reopened).url()).searchParams.get("since_seq")).toBe(String(held.seq))
    await reconnect.waitFor({ state: "detached" })
    await column.getByText("open", { exact: true }).waitFor()
    expect(await transcript.getByRole("listitem").count()).toBe(turnsBefore)

    // A second supervisor's tab decides; the first tab's transcript moves on without a reload.
    const approvals = await context.newPage()
    const more = watchProblems(approvals, srv.url)
    await approvals.goto(at("approvals"))
    await approvals.getByRole("heading", { level: 1, name: "Approvals" }).waitFor()
    const discount = approvals.getByRole("article", { name: new RegExp(`\\(\\${DISCOUNT}\\)$`) })
    await discount.waitFor()
    await screenshot(approvals, "approvals")
    await discount.getByLabel("Note").fill("Approved: returning member.")
    await discount.getByRole("button", { name: "Approve" }).click()
    await discount.waitFor({ state: "detached" })
    // Decided in one tab: it leaves the other one at once, without a reload.
    await queue.getByRole("article", { name: new RegExp(`\\(\\${DISCOUNT}\\)$`) }).waitFor({
      state: "detached",
      timeout: PUSH_MS,
    })

    await transcript.getByText(/Good news/).waitFor()
    expect(await transcript.getByRole("listitem").count()).toBeGreaterThan(turnsBefore)
    const [approved] = await srv.sql<[{ status: string; note: string }]>`select status, note from approvals
      where tenant_id = ${tenantId} and proposed_action = 'concession'`
    expect(approved).toEqual({ status: "approved", note: "Approved: returning member." })
    await screenshot(page, "live")

    // The callback: watched in a second column, denied with a note; the agent offers to talk now
    // instead.
    await page.getByRole("button", { name: `Watch ${CALLBACK}` }).click()
    const callbackTurns = page
      .getByRole("region", { name: `Transcript of the call to ${CALLBACK}` })
      .getByRole("list", { name: "Turns" })
    await callbackTurns
      .getByText(/call you back/)
      .first()
      .waitFor()
    const callback = approvals.getByRole("article", { name: new RegExp(`\\(\\${CALLBACK}\\)$`) })
    await callback.getByLabel("Note").fill("No callbacks this week.")
    await callback.getByRole("button", { name: "Deny" }).click()
    await callback.waitFor({ state: "detached" })
    await queue.getByText("0 waiting for a decision.").waitFor({ timeout: PUSH_MS })
    const [denied] = await srv.sql<[{ status: string }]>`select status from approvals
      where tenant_id = ${tenantId} and proposed_action = 'callback'`
    expect(denied.status).toBe("denied")
    await callbackTurns.getByText(/can't book a callback/).waitFor()
    await approvals.getByText("0 waiting for a decision.").waitFor()
    await approvals.close()
    await queue.close()
    expect(more).toEqual([])
    expect(queueProblems).toEqual([])

    // Once the discount call has ended and been analysed, its column shows the analysis.
    const analysis = column.getByRole("region", { name: "Analysis" })
    const [done] = await eventually(
      () => srv.sql<{ summary: string; goal_met: boolean | null }[]>`select a.summary, a.goal_met
        from call_analyses a join calls c on c.id = a.call_id
        where c.tenant_id = ${tenantId} and c.phone_e164 = ${DISCOUNT} and a.status = 'done'`,
      (r) => r.length === 1,
      60_000,
    )
    await analysis.getByText(done!.summary, { exact: true }).waitFor()
    const goal = done!.goal_met === null ? "—" : done!.goal_met ? "Yes" : "No"
    expect(await analysis.locator("dt:text-is('Goal met') + dd").textContent()).toBe(goal)

    // The session runs out with both calls watched: signed in again (it could be another
    // workspace's session), the page has forgotten them.
    expect(await page.getByRole("region", { name: /^Transcript of the call to / }).count()).toBe(2)
    await context.clearCookies()
    // The next request the page makes is answered 401 and signs it out: the click on a tab, or the
    // page's own (a stream reconnecting) if that comes first and takes the tab away under the click.
    const signIn = page.getByRole("heading", { level: 1, name: "Sign in" })
    const tab = page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Approvals", exact: true })
    const clicked = tab.click({ timeout: 3_000 }).catch(() => undefined)
    await signIn.waitFor()
    // Settled before signing in again, so a click still retrying cannot land on the next page.
    await clicked
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill(PASSWORD)
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    // Back on the page that found the session gone: Approvals after the click, Live if the page's own
    // request found it first.
    await page.getByRole("heading", { level: 1, name: /^(Approvals|Live calls)$/ }).waitFor()
    await open(page, "Live", "Live calls")
    expect(await page.getByRole("region", { name: /^Transcript of the call to / }).count()).toBe(0)
  }, 150_000)

  it("creates an API key, shows its secret once, and revokes it", async () => {
    await open(page, "Settings", "Settings")
    await page.getByLabel("Key name").fill("Nightly export")
    await page.getByLabel("Scope").selectOption("read")
    await page.getByRole("button", { name: "Create key" }).click()
    const secret = (await page.getByTestId("key-secret").textContent()) ?? ""
    const [key] = await srv.sql<[{ id: number; secret_sha256: Buffer; revoked_at: Date | null }]>`
      select id, secret_sha256, revoked_at from api_keys where tenant_id = ${tenantId} and name = 'Nightly export'`
    expect(key.secret_sha256.equals(createHash("sha256").update(secret).digest())).toBe(true)
    const withKey = () => fetch(`${srv.url}/api/workflows`, { headers: { authorization: `Bearer ${secret}` } })
    expect((await withKey()).status).toBe(200)
    await screenshot(page, "settings", [page.getByTestId("key-secret")])
    // Shown once: after "Done" the page no longer holds it, and a reload does not bring it back.
    await page.getByRole("button", { name: "Done" }).click()
    expect(await page.content()).not.toContain(secret)
    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Settings" }).waitFor()
    await page.getByRole("cell", { name: "Nightly export", exact: true }).waitFor()
    expect(await page.content()).not.toContain(secret)

    page.once("dialog", (d) => void d.accept())
    await page.getByRole("button", { name: "Revoke Nightly export" }).click()
    await page.getByRole("row").filter({ hasText: "Nightly export" }).getByText("revoked").waitFor()
    const [revoked] = await srv.sql<[{ revoked_at: Date | null }]>`select revoked_at from api_keys where id = ${key.id}`
    expect(revoked.revoked_at).not.toBeNull()
    expect((await withKey()).status).toBe(401)
  }, 30_000)

  it("keeps the do-not-call list: add, import a CSV, remove", async () => {
    await page.getByLabel("Phone number").fill("+1 202 555 0142")
    await page.getByLabel("Reason").fill("asked on a call")
    await page.getByRole("button", { name: "Add number" }).click()
    await page.getByRole("cell", { name: "+12025550142", exact: true }).waitFor()
    await page.getByLabel("Phone number").fill("12")
    await page.getByRole("button", { name: "Add number" }).click()
    await page.getByText(/valid phone number/).waitFor()

    const csv = "phone,reason\n+12025550143,complaint\n+12025550142,again\nnope,bad\n"
    await page.getByLabel("DNC CSV").setInputFiles({ name: "dnc.csv", mimeType: "text/csv", buffer: Buffer.from(csv) })
    await page.getByRole("button", { name: "Import CSV" }).click()
    await page.getByText("Imported: 1 added, 1 already listed, 1 not valid numbers.").waitFor()
    const listed = async () =>
      (
        await srv.sql<{ phone_e164: string }[]>`select phone_e164 from dnc_entries where tenant_id = ${tenantId}
          order by phone_e164`
      ).map((r) => r.phone_e164)
    expect(await listed()).toEqual(["+12025550142", "+12025550143"])

    await page.getByRole("button", { name: "Remove +12025550142" }).click()
    await page.getByRole("cell", { name: "+12025550142", exact: true }).waitFor({ state: "detached" })
    expect(await listed()).toEqual(["+12025550143"])
    // Onboarding: the checklist and every provider's credential state, secrets masked.
    await page.getByRole("heading", { name: "Onboarding" }).waitFor()
    await page.getByRole("table", { name: "Provider credentials (secrets masked)" }).waitFor()
  }, 30_000)

  it("charts calls per day and downloads the weekly PDF", async () => {
    await open(page, "Reports", "Reports")
    const chart = page.getByRole("img", { name: /Bar chart: \d+ calls over 30 days/ })
    await chart.locator("canvas").waitFor()
    const [calls] = await srv.sql<[{ n: number }]>`select count(*)::int as n from calls where tenant_id = ${tenantId}
      and outcome is distinct from 'insufficient_funds'`
    expect(calls.n).toBeGreaterThanOrEqual(2)
    await page.getByText(new RegExp(`: ${calls.n} in all\\.`)).waitFor()
    await screenshot(page, "reports")
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("link", { name: "Download PDF" }).click(),
    ])
    const pdf = readFileSync((await download.path())!)
    expect(pdf.subarray(0, 5).toString("latin1")).toBe("%PDF-")
    // A reversed period is explained on the page rather than sent.
    await page.getByLabel("From").fill("2030-01-10")
    await page.getByLabel("To").fill("2030-01-01")
    await page.getByText("The last day must not be before the first.").waitFor()
  }, 30_000)

  it("reads at 360 px wide and sends an expired session back to sign-in", async () => {
    await page.setViewportSize({ width: 360, height: 780 })
    // Nothing widens the page past the screen (wide tables scroll inside their own box).
    for (const [link, heading] of [
      ["Live", "Live calls"],
      ["Approvals", "Approvals"],
      ["Settings", "Settings"],
      ["Reports", "Reports"],
      ["Campaigns", "Campaigns"],
      ["Wallet", "Wallet"],
    ] as const) {
      await open(page, link, heading)
      const overflow = Number(await page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))
      expect(overflow, `${heading} at 360 px`).toBeLessThanOrEqual(0)
    }
    await page.getByTestId("balance").waitFor()
    await screenshot(page, "wallet-360")
    await page.setViewportSize({ width: 1280, height: 800 })

    // The cookie runs out (the browser drops it): the next API answer is 401 and the page goes
    // back to sign-in rather than showing a broken page.
    await context.clearCookies()
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Settings", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    expect(problems).toEqual([])
  }, 30_000)
})
