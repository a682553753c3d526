// The console's sign-in and session edges in Chromium, beside the main walk-through in
// browser.test.ts: an emailed code, a wrong one, a session ended elsewhere (back to sign-in, then
// on to the page asked for), sign-out, a prompt refused inline, the page at 360 px wide, and the
// keyboard alone.
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { assertBrowser, launchChromium, skipBrowser, watchProblems } from "./browser.support.js"

describe.skipIf(skipBrowser)("the console's session in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let page: Page
  let problems: string[]
  let s: Session

  beforeAll(async () => {
    assertBrowser()
    srv = await startTestServer()
    s = await api(srv).signup()
    browser = await launchChromium()
    page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
    problems = watchProblems(page, srv.url)
  })
  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("signs in with an emailed code, after refusing a wrong one in words", async () => {
    await page.goto(`${srv.url}/console#/campaigns`)
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    await page.getByRole("button", { name: "Email me a code" }).click()
    await page.getByLabel("Email").fill(s.email)
    await page.getByRole("button", { name: "Send code" }).click()
    await page.getByRole("status").filter({ hasText: "6-digit code" }).waitFor()
    const mail = readOutbox(srv.config.outboxFile).filter((m) => m.kind === "otp" && m.to === s.email)
    expect(mail).toHaveLength(1)
    const code = /\b(\d{6})\b/.exec(mail[0]!.text)![1]!
    await page.getByLabel("Code").fill(code === "000000" ? "111111" : "000000")
    await page.getByRole("button", { name: "Verify code" }).click()
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/code/i)
    await page.getByLabel("Code").fill(code)
    await page.getByRole("button", { name: "Verify code" }).click()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    // The session is the httpOnly cookie; the page keeps no token of its own.
    const cookie = (await page.context().cookies()).find((c) => c.name === "svc_session")!
    expect(cookie.httpOnly).toBe(true)
    expect(await page.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")).toBe("{}{}")
  })

  it("shows a refused prompt's error beside the field, creating nothing", async () => {
    await page.getByLabel("Prompt").fill("   ")
    await page.getByRole("button", { name: "Create workflow" }).click()
    await expect.poll(() => page.locator(".field-invalid .error").textContent()).toMatch(/empty/)
    const [{ n }] = await srv.sql<
      [{ n: number }]
    >`select count(*)::int as n from workflows where tenant_id = ${s.tenantId}`
    expect(n).toBe(0)
  })

  it("fits 360 px without sideways scrolling", async () => {
    await page.setViewportSize({ width: 360, height: 800 })
    for (const hash of ["#/campaigns", "#/live", "#/approvals"]) {
      await page.goto(`${srv.url}/console${hash}`)
      await page.locator("main h1").waitFor()
      expect(await page.evaluate("document.documentElement.scrollWidth"), hash).toBeLessThanOrEqual(360)
    }
    await page.setViewportSize({ width: 1200, height: 900 })
  })

  it("goes back to sign-in when the session ends elsewhere, then on to the page asked for", async () => {
    await page.goto(`${srv.url}/console#/approvals`)
    await page.getByRole("heading", { level: 1, name: "Approvals" }).waitFor()
    const cookie = (await page.context().cookies()).find((c) => c.name === "svc_session")!
    const out = await api(srv).call("POST", "/auth/logout", {
      headers: { cookie: `svc_session=${cookie.value}`, origin: srv.url },
    })
    expect(out.status).toBe(200)
    // The session's streams end with it; the approvals stream's reconnect is answered 401.
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor({ timeout: 10_000 })
    await page.getByLabel("Email").fill(s.email)
    await page.getByLabel("Password").fill(s.password)
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Approvals" }).waitFor()
  })

  it("signs out: the session is revoked on the server, and the page shows sign-in", async () => {
    const before = (await page.context().cookies()).find((c) => c.name === "svc_session")!.value
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    const me = await api(srv).call("GET", "/auth/me", { headers: { cookie: `svc_session=${before}` } })
    expect(me.status).toBe(401)
    expect(problems).toEqual([])
  })

  it("signs in and moves between pages from the keyboard alone, with the focus always visible", async () => {
    await page.goto(`${srv.url}/console#/campaigns`)
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    await page.getByLabel("Email").focus()
    await page.keyboard.type(s.email)
    await page.keyboard.press("Tab")
    expect(await page.evaluate("document.activeElement.getAttribute('type')")).toBe("password")
    await page.keyboard.type(s.password)
    await page.keyboard.press("Enter")
    await expect.poll(() => page.locator("main h1").first().textContent(), { timeout: 10_000 }).not.toMatch(/Sign in/)
    // The page asked for takes the focus to its content (as a page load would) a moment after it
    // renders: tabbing before that would race it.
    await expect.poll(() => page.evaluate("document.activeElement?.id")).toBe("main")
    // Tab reaches the navigation; each focused element shows a focus ring; Enter follows the link.
    let reached = false
    for (let i = 0; i < 30 && !reached; i++) {
      await page.keyboard.press("Tab")
      const [tag, text, outline] = (await page.evaluate(
        "[document.activeElement.tagName, document.activeElement.textContent.trim(), " +
          "getComputedStyle(document.activeElement).outlineStyle]",
      )) as [string, string, string]
      if (tag === "BODY") continue // focus left the page's controls (the browser's own UI comes next)
      expect(outline, `focus ring on ${tag} "${text}"`).not.toBe("none")
      reached = text === "Approvals"
    }
    expect(reached).toBe(true)
    await page.keyboard.press("Enter")
    await page.getByRole("heading", { level: 1, name: "Approvals" }).waitFor()
    expect(problems).toEqual([])
  })
})
