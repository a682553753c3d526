// A finished call's recording plays in the console (issue 38, "done when"), in Chromium: a simulated
// run on the media path records its one answered call; its call view (the results' drawer) has the
// Recording player pointing at GET /api/calls/{id}/recording; Chromium reads the Ogg Opus (by range
// requests, answered 206), finds its length, plays it, and the transcript turn being heard is marked
// (class `playing`, aria-current) — the callee's, once the player is past the callee's first cue.
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { assertBrowser, eventually, launchChromium, skipBrowser, watchProblems } from "./browser.support.js"

// A fifth of real time, the fastest the speech engines follow: the media path's audio is recorded as it flows.
const ENV = { ...FAST_RUNTIME_ENV, SIM_TIME_SCALE: "0.2", MEDIA_STREAMS: "all" }
/** 3 agrees (the simulator's last-digit personas), and the default rule book discloses recording. */
const CY = { phone: "+12025550173", name: "Cy Rowe" }
const STEP_MS = 15_000

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

interface Recording {
  readonly url: string
  readonly duration_ms: number
  readonly bytes: number
  readonly cues: ReadonlyArray<{ readonly at_ms: number; readonly speaker: "agent" | "callee" }>
}

/** The player's state, read in the page (a string: the suite's types know no DOM). */
const PLAYER = `(() => {
  const a = document.querySelector("audio[data-testid=recording]")
  return { readyState: a.readyState, duration: a.duration, currentTime: a.currentTime, paused: a.paused,
    error: a.error && a.error.code }
})()`
/** The transcript's turns: their speaker classes and aria-current. */
const TURNS = `[...document.querySelectorAll("ol.transcript > li")]
  .map((li) => ({ cls: li.className, current: li.getAttribute("aria-current") }))`

describe.skipIf(skipBrowser)("a recorded call played in the console's call view in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let page: Page
  let problems: string[]
  let owner: Session
  let workflowName = ""
  let rec: Recording
  /** Every answer to the recording's URL: its status and Content-Range. */
  const fetched: Array<{ status: number; range: string | undefined }> = []

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser] = await Promise.all([startTestServer({ env: ENV }), launchChromium()])
    const a = api(srv)
    owner = await a.signup({ country: "US" })
    const call = async (method: string, path: string, body?: unknown) =>
      (await (await a.call(method, path, { token: owner.token, ...(body !== undefined && { body }) })).json()) as Json
    const w = await call("POST", "/api/workflows", { nl_prompt: "Invite members to renew their plan." })
    workflowName = w.name
    await call("POST", `/api/workflows/${w.id}/audience`, { rows: [CY] })
    await call("PUT", `/api/workflows/${w.id}/compliance`, { consent_attestation_text: "Members opted in." })
    const runId = (await call("POST", `/api/workflows/${w.id}/run`)).run_id as number
    await eventually(
      () => srv.sql<Array<{ status: string }>>`select status from runs where id = ${runId}`,
      (rows) => rows[0]?.status === "completed",
      45_000,
    )
    const [c] = await srv.sql<[{ id: number }]>`select id from calls where run_id = ${runId} order by id desc limit 1`
    const view = await eventually(
      () => call("GET", `/api/calls/${c.id}`),
      (v) => v.recording != null,
    )
    rec = view.recording as Recording
    expect(rec.cues.some((q) => q.speaker === "callee")).toBe(true)

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US" })
    context.setDefaultTimeout(STEP_MS)
    await context.addCookies([{ name: "svc_session", value: owner.cookie.slice("svc_session=".length), url: srv.url }])
    page = await context.newPage()
    problems = watchProblems(page, srv.url)
    page.on("response", (r) => {
      if (new URL(r.url()).pathname === rec.url)
        fetched.push({ status: r.status(), range: r.headers()["content-range"] })
    })
  }, 75_000)

  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("plays the recording, the transcript following along", async () => {
    await page.goto(`${srv.url}/console#/campaigns`)
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    await page.getByRole("button", { name: workflowName, exact: true }).click()
    const detail = page.getByRole("article")
    await detail.getByRole("tab", { name: "Results", exact: true }).click()
    const runs = detail.getByRole("region", { name: "Runs and results" })
    await runs.getByRole("button", { name: "Show results" }).first().click()
    await runs.getByRole("button", { name: `Open the call to ${CY.name}` }).click()
    const drawer = page.getByRole("dialog", { name: `Call to ${CY.name} (${CY.phone})` })
    const section = drawer.getByRole("region", { name: "Recording" })
    await section.getByRole("heading", { name: "Recording" }).waitFor()
    const audio = section.getByTestId("recording")
    expect(await audio.getAttribute("src")).toBe(rec.url)
    expect(await audio.getAttribute("controls")).not.toBeNull()

    // This Chromium decodes Ogg Opus (else the player could never play, and the test says so here).
    expect(await page.evaluate(`document.createElement("audio").canPlayType("audio/ogg; codecs=opus")`)).toBe(
      "probably",
    )
    const player = async () =>
      (await page.evaluate(PLAYER)) as {
        readyState: number
        duration: number
        currentTime: number
        paused: boolean
        error: number | null
      }
    // Its length, read from the file by Chromium (Ogg's last granule position): the recording's, within 10%.
    const ready = await eventually(
      player,
      (p) => p.error !== null || (p.readyState >= 1 && Number.isFinite(p.duration)),
    )
    expect(ready.error).toBeNull()
    expect(Math.abs(ready.duration - rec.duration_ms / 1000)).toBeLessThanOrEqual((rec.duration_ms / 1000) * 0.1)

    // Played from just past the callee's first cue: that turn is the one marked, and only it.
    const cue = rec.cues.find((q) => q.speaker === "callee")!
    const from = cue.at_ms / 1000 + 0.05
    await page.evaluate(`(async () => {
      const a = document.querySelector("audio[data-testid=recording]")
      a.currentTime = ${from}
      await a.play()
    })()`)
    await expect.poll(async () => (await player()).currentTime, { timeout: STEP_MS }).toBeGreaterThan(from + 0.2)
    expect((await player()).paused).toBe(false)
    const turns = async () => (await page.evaluate(TURNS)) as Array<{ cls: string; current: string | null }>
    const markedOf = (ts: Awaited<ReturnType<typeof turns>>) => ts.flatMap((t, i) => (t.current === "true" ? [i] : []))
    await expect.poll(async () => markedOf(await turns()), { timeout: STEP_MS }).toHaveLength(1)
    const shown = await turns()
    const marked = markedOf(shown)
    const heard = shown[marked[0]!]!
    expect(heard.cls.split(" ").sort()).toEqual(["callee", "playing"])
    // The k-th callee cue is the k-th callee turn: here the first.
    expect(marked[0]).toBe(shown.findIndex((t) => t.cls.split(" ").includes("callee")))
    await page.evaluate(`document.querySelector("audio[data-testid=recording]").pause()`)

    // Chromium asked for it by range ("bytes=0-" first), each answered 206 with at most 256 KiB of it.
    expect(fetched.length).toBeGreaterThan(0)
    expect(fetched.every((f) => f.status === 206)).toBe(true)
    for (const f of fetched) {
      const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(f.range ?? "")
      expect(m, f.range).not.toBeNull()
      expect(Number(m![3])).toBe(rec.bytes)
      expect(Number(m![2]) - Number(m![1]) + 1).toBeLessThanOrEqual(256 * 1024)
    }
    expect(problems).toEqual([])
  }, 45_000)
})
