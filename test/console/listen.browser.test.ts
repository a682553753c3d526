// Listening in from the Live page, in Chromium (issue 38, item 3): a supervisor picks a running
// simulated call heard as audio and clicks Listen; the call's audio arrives, is decoded and is fed to
// the page's audio graph; the supervisor is offered Take over, whose request goes out with the number
// typed (one that is not a number is refused in words, so the call goes on); signing out ends the stream
// (the server ends it, the page stops) and closes the audio, so nothing more is played.
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ListenStreams } from "../../src/calls/ListenStreams.js"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { assertBrowser, eventually, launchChromium, skipBrowser, watchProblems } from "./browser.support.js"

// 100× fast, heard as audio (the harness's MEDIA_STREAMS=all); the callee holds for a decision that
// never comes, so the call stays up to its cap (30 minutes of the simulator's time: 18 s here).
const ENV = { ...FAST_RUNTIME_ENV, APPROVAL_HOLD_MS: "1000000" }
const PROMPT = "Win back lapsed members with a discount of up to $20. Keep each call under 30 minutes."
/** 7 asks for a discount (the simulator's last-digit personas). */
const DEE = { phone: "+12025550107", name: "Dee Marsh" }
const STEP_MS = 15_000

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * What the page fed its audio graph, counted beside it (not by the page): samples started, and the
 * contexts it made (their states). Browser code, so a string: the suite's types know no DOM.
 */
const COUNT_AUDIO = `
  window.__audio = { started: 0, contexts: [] }
  const Made = window.AudioContext
  window.AudioContext = class extends Made {
    constructor(o) {
      super(o)
      window.__audio.contexts.push(this)
    }
  }
  const start = AudioBufferSourceNode.prototype.start
  AudioBufferSourceNode.prototype.start = function (...args) {
    window.__audio.started += this.buffer ? this.buffer.length : 0
    return start.apply(this, args)
  }
`

describe.skipIf(skipBrowser)("listening in from the Live page in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let page: Page
  let problems: string[]
  let owner: Session
  let supervisor: Session
  let callId = 0

  const audio = async () =>
    (await page.evaluate("({ started: __audio.started, states: __audio.contexts.map((c) => c.state) })")) as {
      started: number
      states: string[]
    }
  const listeners = () => srv.running.runtime.runSync(ListenStreams).listening(owner.tenantId, callId)

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser] = await Promise.all([startTestServer({ env: ENV }), launchChromium()])
    const a = api(srv)
    owner = await a.signup({ country: "US" })
    supervisor = await a.addMember(owner, "supervisor")
    const call = async (method: string, path: string, body?: unknown) =>
      (await (await a.call(method, path, { token: owner.token, ...(body !== undefined && { body }) })).json()) as Json
    const intent = await call("POST", "/billing/topup", { amount_minor: 1_000_000 })
    await a.call("POST", "/billing/webhooks/stub", { body: { external_id: intent.external_id, status: "succeeded" } })
    const w = await call("POST", "/api/workflows", { nl_prompt: PROMPT })
    await call("POST", `/api/workflows/${w.id}/audience`, { rows: [DEE] })
    await call("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Members opted in." })
    await call("POST", `/api/workflows/${w.id}/run`)
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US" })
    context.setDefaultTimeout(STEP_MS)
    await context.addCookies([
      { name: "svc_session", value: supervisor.cookie.slice("svc_session=".length), url: srv.url },
    ])
    await context.addInitScript({ content: COUNT_AUDIO })
    page = await context.newPage()
    problems = watchProblems(page, srv.url)
    // The call is up and its media stream asked for.
    const [row] = await eventually(
      () => srv.sql<Array<{ id: number }>>`
        select c.id from calls c join media_stream_tokens m on m.call_id = c.id
        where c.tenant_id = ${owner.tenantId} and c.status = 'connected' limit 1`,
      (rows) => rows.length > 0,
    )
    callId = row!.id
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("plays a live call's audio once Listen is clicked, and stops on sign-out", async () => {
    await page.goto(`${srv.url}/console#/live`)
    await page.getByRole("heading", { level: 1, name: "Live calls" }).waitFor()
    await page.getByRole("button", { name: `Listen ${DEE.phone}`, exact: true }).click()
    const panel = page.getByRole("region", { name: `Listening to the call to ${DEE.phone}` })
    await panel.waitFor()
    const count = async (name: "decoded" | "played") => Number(await panel.getAttribute(`data-samples-${name}`))
    // A second of the call's audio (8,000 samples) decoded, and some of it handed to the audio graph.
    await expect.poll(() => count("decoded"), { timeout: STEP_MS }).toBeGreaterThan(8_000)
    await expect.poll(() => count("played"), { timeout: STEP_MS }).toBeGreaterThan(0)
    await expect.poll(async () => (await audio()).started, { timeout: STEP_MS }).toBeGreaterThan(0)
    expect((await audio()).states).toEqual(["running"])
    expect(await panel.getAttribute("data-state")).toBe("playing")
    expect(await page.getByRole("button", { name: `Stop listening ${DEE.phone}`, exact: true }).count()).toBe(1)
    expect(listeners()).toBe(1)

    await panel.getByRole("button", { name: "Take over", exact: true }).click()
    await panel.getByLabel("Operator number").fill("555")
    const asked = page.waitForRequest(
      (r) => r.method() === "POST" && r.url().endsWith(`/api/calls/${callId}/take-over`),
    )
    await panel.getByRole("button", { name: "Hand the call over", exact: true }).click()
    expect((await asked).postDataJSON()).toEqual({ operator_number: "555" })
    await panel.getByText("Operator number must be a phone number in international form", { exact: false }).waitFor()

    await page.getByRole("button", { name: "Sign out", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    // The server ended the stream, and the page closed its audio: nothing more reaches the graph.
    await expect.poll(listeners, { timeout: 2_000 }).toBe(0)
    await expect.poll(async () => (await audio()).states, { timeout: 2_000 }).toEqual(["closed"])
    const stopped = (await audio()).started
    await new Promise((r) => setTimeout(r, 500))
    expect((await audio()).started).toBe(stopped)
    expect(listeners()).toBe(0)
    expect(problems).toEqual([])
  }, 45_000)
})
