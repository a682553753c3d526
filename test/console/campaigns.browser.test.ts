// The Campaigns page in Chromium, beyond the walk-through in browser.test.ts: a prompt whose rule
// book fails validation (its errors in words beside the prompt, nothing created), a draft's
// schedule, persona and voice edited and kept (its Settings section), the opening line previewed in
// the audio player (its Rule book section), a ready workflow run, paused, resumed and retired from
// its buttons, and a finished run's results (its Results section, outcomes in words) read on the
// page and downloaded as CSV. Each step checks what the page shows and what the API
// (or the database) then holds.
import { readFileSync } from "node:fs"
import type { Browser, Locator, Page, Request } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, FAST_RUNTIME_ENV, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { postClone, wav } from "../voices/fixtures.js"
import { assertBrowser, eventually, launchChromium, screenshot, skipBrowser, watchProblems } from "./browser.support.js"

const STEP_MS = 15_000
const VOICE_NAME = "Front desk"
const WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]

type Json = Record<string, any>

/** A name as the start of a pattern (a heading's name is the workflow's, then its status). */
const startsWith = (name: string) => new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`)

describe.skipIf(skipBrowser)("the Campaigns page in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let page: Page
  let problems: string[]
  let s: Session
  let voiceId = 0
  /** The draft the first test creates, edited and previewed by the next two. */
  let draft = { id: 0, name: "" }

  /** The API as the signed-in owner sees it. */
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> => {
    const res = await api(srv).call(method, path, { token: s.token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }
  const workflow = async (id: number) => (await call("GET", `/api/workflows/${id}`)).body
  /** How many workflows and rule books the workspace has in the database. */
  const stored = async () =>
    (
      await srv.sql<[{ workflows: number; rule_books: number }]>`select
        (select count(*)::int from workflows where tenant_id = ${s.tenantId}) as workflows,
        (select count(*)::int from rule_books where tenant_id = ${s.tenantId}) as rule_books`
    )[0]
  /** The chosen workflow's panel, named by its heading (the name, then the status badge). */
  const detail = () => page.getByRole("article")
  /** A definition in the chosen workflow's overview (Voice, Schedule, Runs…). */
  const summary = (term: string) => detail().locator(`dl.kv dt:text-is('${term}') + dd`).first()
  /** Opens one of the chosen workflow's sections (Overview, Audience, Rule book, Consent, Settings, Results). */
  const section = (name: string) => detail().getByRole("tab", { name, exact: true }).click()
  /** The first answer to `method` on `path` (exact path, any query) after this call. */
  const answer = (method: string, path: string | RegExp) =>
    page.waitForResponse((r) => {
      const p = new URL(r.url()).pathname
      return r.request().method() === method && (typeof path === "string" ? p === path : path.test(p))
    })
  /** Offered: on the page and enabled (a retired workflow's Run may be gone or greyed out). */
  const offered = async (button: Locator) => (await button.count()) > 0 && (await button.isEnabled())

  /** Opens a workflow from the lists, as after a reload (the choice is not kept in the URL). */
  async function choose(name: string) {
    await page.getByRole("button", { name, exact: true }).click()
    await detail()
      .getByRole("heading", { level: 2, name: startsWith(name) })
      .waitFor()
  }

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser] = await Promise.all([startTestServer({ env: { ...FAST_RUNTIME_ENV } }), launchChromium()])
    // A verified owner (the link read from the outbox), a funded wallet and one cloned voice.
    s = await api(srv).signup({ country: "US" })
    const intent = await call("POST", "/billing/topup", { amount_minor: 1_000_000 })
    expect(intent.status).toBe(201)
    const paid = await api(srv).call("POST", "/billing/webhooks/stub", {
      body: { external_id: intent.body.external_id, status: "succeeded" },
    })
    expect(paid.status).toBe(200)
    const clone = await postClone(srv.url, s.token, {
      name: VOICE_NAME,
      sample: { bytes: wav({ hz: 180, seconds: 6 }), filename: "desk.wav", type: "audio/wav" },
    })
    expect(clone.status).toBe(201)
    voiceId = ((await clone.json()) as { id: number }).id

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US" })
    context.setDefaultTimeout(STEP_MS)
    page = await context.newPage()
    problems = watchProblems(page, srv.url)
    await page.goto(`${srv.url}/console#/campaigns`)
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor()
    await page.getByLabel("Email").fill(s.email)
    await page.getByLabel("Password").fill(s.password)
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("shows a rule book that fails validation in words beside the prompt, and creates nothing", async () => {
    const form = page.getByRole("form", { name: "New workflow" })
    const prompt = form.getByLabel("Prompt", { exact: true })
    const create = form.getByRole("button", { name: "Create workflow" })
    const text = "Call members whose gym membership lapsed about rejoining. INVALID_RULEBOOK"
    await prompt.fill(text)
    const refused = answer("POST", "/api/workflows")
    await create.click()
    const res = await refused
    expect(res.status()).toBe(422)
    const body = (await res.json()) as { code: string; errors: { field: string; message: string }[] }
    expect(body.code).toBe("RULE_BOOK_INVALID")
    expect(body.errors.length).toBeGreaterThan(0)

    const alert = form.getByRole("alert")
    await alert.waitFor()
    const shown = (await alert.textContent()) ?? ""
    expect(shown).toMatch(/did not pass validation; nothing was created/)
    for (const e of body.errors) expect(shown).toContain(e.message)
    expect(shown).not.toContain(body.code)
    // Beside the prompt: under its field, above the button; the prompt is kept to be adjusted.
    const [field, box, button] = await Promise.all([prompt.boundingBox(), alert.boundingBox(), create.boundingBox()])
    expect(box!.y).toBeGreaterThanOrEqual(field!.y + field!.height)
    expect(box!.y + box!.height).toBeLessThanOrEqual(button!.y)
    expect(await prompt.inputValue()).toBe(text)
    await screenshot(page, "campaigns-rule-book-invalid")

    expect(await stored()).toEqual({ workflows: 0, rule_books: 0 })
    expect((await call("GET", "/api/workflows")).body.workflows).toEqual([])
    await page
      .getByRole("region", { name: /^Drafts/ })
      .getByText("None.")
      .waitFor()

    // Adjusted, the prompt creates the workflow, the errors go and the new draft opens.
    await prompt.fill("Call members whose gym membership lapsed about rejoining.")
    const created = answer("POST", "/api/workflows")
    await create.click()
    expect((await created).status()).toBe(201)
    const [row] = await eventually(
      () => srv.sql<{ id: number; name: string }[]>`select id, name from workflows where tenant_id = ${s.tenantId}`,
      (rows) => rows.length === 1,
    )
    draft = row!
    await detail()
      .getByRole("heading", { level: 2, name: startsWith(draft.name) })
      .waitFor()
    expect(await form.getByRole("alert").count()).toBe(0)
    expect(await prompt.inputValue()).toBe("")
  }, 45_000)

  it("edits a draft's schedule, persona and voice, and they stay after a reload", async () => {
    const before = await workflow(draft.id)
    // A US workspace's rule book speaks with an American persona.
    expect(before).toMatchObject({ status: "draft", persona: "anya", schedule_kind: "immediate" })
    await section("Settings")
    const settings = page.getByRole("form", { name: "Workflow settings" })
    await settings.getByLabel("Persona", { exact: true }).selectOption("kai")
    await settings.getByLabel("Voice", { exact: true }).selectOption({ label: VOICE_NAME })
    await settings.getByLabel("Schedule", { exact: true }).selectOption("window")
    await settings.getByLabel("From", { exact: true }).fill("10:00")
    await settings.getByLabel("Until", { exact: true }).fill("18:30")
    await settings.getByLabel("Time zone", { exact: true }).fill("America/Chicago")
    const days = settings.getByRole("group", { name: "Days" })
    for (const d of ["sat", "sun"]) await days.getByRole("checkbox", { name: d, exact: true }).uncheck()
    const put = answer("PUT", `/api/workflows/${draft.id}`)
    const assigned = answer("PUT", "/api/voice-avatars/assign")
    await settings.getByRole("button", { name: "Save changes" }).click()
    expect((await put).status()).toBe(200)
    expect((await assigned).status()).toBe(200)

    // The summary above follows (the workflow was read again), and the form still says it saved.
    const schedule = "Only on the chosen days: Mon, Tue, Wed, Thu, Fri, 10:00–18:30 (America/Chicago)"
    await expect.poll(() => summary("Schedule").textContent()).toBe(schedule)
    await expect.poll(() => summary("Voice").textContent()).toBe("Kai (American English)")
    expect(await settings.getByRole("status").textContent()).toBe("Saved.")

    const after = await workflow(draft.id)
    expect(after).toMatchObject({
      status: "draft",
      persona: "kai",
      schedule_kind: "window",
      schedule: { calling_hours: { start: "10:00", end: "18:30" }, timezone: "America/Chicago", days: WEEKDAYS },
      rule_book: { persona: "kai" },
      // A new persona is a new rule-book version: exactly one.
      rule_book_version: before.rule_book_version + 1,
    })
    const voices = (await call("GET", "/api/voice-avatars")).body.voices as { id: number; workflow_ids: number[] }[]
    expect(voices.find((v) => v.id === voiceId)?.workflow_ids).toEqual([draft.id])
    const [row] = await srv.sql<[{ voice_avatar_id: number | null }]>`
      select voice_avatar_id from workflows where id = ${draft.id}`
    expect(row.voice_avatar_id).toBe(voiceId)
    await detail().evaluate((el) => el.scrollIntoView({ block: "start" }))
    await screenshot(page, "campaigns-settings")

    // A reload shows the stored settings, the cloned voice among them.
    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    await choose(draft.name)
    await section("Settings")
    expect(await settings.getByLabel("Persona", { exact: true }).inputValue()).toBe("kai")
    await expect.poll(() => settings.getByLabel("Voice", { exact: true }).inputValue()).toBe(String(voiceId))
    expect(await settings.getByLabel("Schedule", { exact: true }).inputValue()).toBe("window")
    expect(await settings.getByLabel("From", { exact: true }).inputValue()).toBe("10:00")
    expect(await settings.getByLabel("Until", { exact: true }).inputValue()).toBe("18:30")
    expect(await settings.getByLabel("Time zone", { exact: true }).inputValue()).toBe("America/Chicago")
    for (const d of ["mon", "tue", "wed", "thu", "fri", "sat", "sun"])
      expect(await days.getByRole("checkbox", { name: d, exact: true }).isChecked(), d).toBe(WEEKDAYS.includes(d))

    // Changing only the hours changes only the schedule: no new rule book, no voice reassigned.
    const reassigned: string[] = []
    const watchAssign = (r: Request) => {
      if (new URL(r.url()).pathname === "/api/voice-avatars/assign") reassigned.push(r.method())
    }
    page.on("request", watchAssign)
    await settings.getByLabel("Until", { exact: true }).fill("19:00")
    const again = answer("PUT", `/api/workflows/${draft.id}`)
    await settings.getByRole("button", { name: "Save changes" }).click()
    expect((await again).status()).toBe(200)
    await expect.poll(() => summary("Schedule").textContent()).toContain("10:00–19:00")
    await settings.getByRole("status").filter({ hasText: "Saved." }).waitFor()
    expect(await workflow(draft.id)).toMatchObject({
      persona: "kai",
      schedule: { calling_hours: { start: "10:00", end: "19:00" }, days: WEEKDAYS },
      rule_book_version: after.rule_book_version,
    })
    page.off("request", watchAssign)
    expect(reassigned).toEqual([])
    expect(await settings.getByLabel("Voice", { exact: true }).inputValue()).toBe(String(voiceId))
  }, 45_000)

  it("previews the opening line in the workflow's voice, playable in the audio player", async () => {
    await section("Rule book")
    const opening = page.getByRole("region", { name: "Opening line" })
    const made = answer("POST", "/api/workflows/preview-opening")
    const fetched = answer("GET", /^\/api\/workflows\/preview-opening\/[0-9a-f]{32}$/)
    await opening.getByRole("button", { name: "Preview opening" }).click()
    const clipRes = await made
    expect(clipRes.status()).toBe(200)
    // Spoken by the persona and the cloned voice chosen in the settings above.
    const clip = (await clipRes.json()) as { persona: string; voice_id: number | null; duration_ms: number }
    expect(clip).toMatchObject({ persona: "kai", voice_id: voiceId })
    expect(clip.duration_ms).toBeGreaterThan(0)
    const audioRes = await fetched
    expect(audioRes.status()).toBe(200)
    expect(audioRes.headers()["content-type"]).toMatch(/^audio\//)
    // (The protocol does not hand over the body of a response the page read as a blob: the same,
    // immutable URL is read again here and must be what the browser was sent.)
    const bytes = Buffer.from(await (await fetch(audioRes.url())).arrayBuffer())
    expect(Number(audioRes.headers()["content-length"])).toBe(bytes.length)
    expect(bytes.length).toBeGreaterThan(1000)
    // An MP3: an ID3 tag or a frame sync.
    expect(
      bytes.subarray(0, 3).toString("latin1") === "ID3" || (bytes[0] === 0xff && (bytes[1]! & 0xe0) === 0xe0),
    ).toBe(true)

    const player = opening.getByLabel("Opening line preview")
    await player.waitFor()
    const src = (await player.getAttribute("src")) ?? ""
    expect(src).toMatch(/^blob:/)
    // Chromium decodes it (a build without the MP3 decoder says so with MEDIA_ERR_SRC_NOT_SUPPORTED,
    // and the bytes above are then the check).
    // (The tests compile without the DOM's types: the element is typed loosely.)
    const media = (await player.evaluate(
      (el: any) =>
        new Promise((done) => {
          const report = () => done({ duration: el.duration, error: el.error ? el.error.code : null })
          if (el.readyState >= 1 || el.error) return report()
          el.addEventListener("loadedmetadata", report, { once: true })
          el.addEventListener("error", report, { once: true })
          el.load()
        }),
    )) as { duration: number; error: number | null }
    // Decoded, it is the clip the API made (its length, give or take the encoder's padding).
    if (media.error === null) expect(Math.abs(media.duration - clip.duration_ms / 1000)).toBeLessThan(0.5)
    else expect(media.error).toBe(4)
  }, 30_000)

  it("runs a ready workflow, pauses, resumes and retires it from its buttons", async () => {
    // A ready workflow (audience, consent) whose start time is a year away: its run stays
    // running, dialling no one, for as long as the clicks take (at the simulator's speed a run of
    // a few numbers would be over before Pause could be pressed).
    const created = await call("POST", "/api/workflows", { nl_prompt: "Remind members about the new opening hours." })
    expect(created.status).toBe(201)
    const { id, name } = created.body as { id: number; name: string }
    const rows = [{ phone: "+12025550131" }, { phone: "+12025550132" }]
    expect((await call("POST", `/api/workflows/${id}/audience`, { rows })).status).toBe(200)
    expect(
      (await call("PUT", `/api/workflows/${id}/compliance`, { consent_attestation_text: "Opted in." })).status,
    ).toBe(200)
    const startAt = new Date(Date.now() + 365 * 86_400_000).toISOString()
    const put = await call("PUT", `/api/workflows/${id}`, { schedule_kind: "once", schedule: { start_at: startAt } })
    expect(put.status).toBe(200)

    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    await choose(name)
    const heading = detail().getByRole("heading", { level: 2 })
    const button = (label: string) => detail().getByRole("button", { name: label, exact: true })
    const notice = detail().getByRole("status")
    const runs = async () => (await call("GET", `/api/workflows/${id}/runs`)).body.runs as Json[]
    const statusOf = async () => ({ workflow: (await workflow(id)).status, runs: (await runs()).map((r) => r.status) })
    expect(await button("Pause").isDisabled()).toBe(true)

    await button("Run").click()
    await notice.filter({ hasText: /^Run \d+ started: 2 queued\.$/ }).waitFor()
    const [run] = await runs()
    expect(run).toMatchObject({ status: "running" })
    expect(await notice.textContent()).toBe(`Run ${run!.run_id} started: 2 queued.`)
    await expect.poll(() => heading.textContent()).toMatch(/Live$/)
    expect(await statusOf()).toEqual({ workflow: "live", runs: ["running"] })
    expect(await button("Run").isDisabled()).toBe(true)
    await page.getByRole("region", { name: /^Live/ }).getByRole("button", { name, exact: true }).waitFor()

    // Retiring a running workflow is refused in words; nothing changes.
    await button("Retire").click()
    await button("Yes, retire").click()
    await detail()
      .getByRole("alert")
      .filter({ hasText: /pause or finish it first/ })
      .waitFor()
    expect(await statusOf()).toEqual({ workflow: "live", runs: ["running"] })

    await button("Pause").click()
    await notice.filter({ hasText: "Paused: calls in flight will finish." }).waitFor()
    await expect.poll(() => heading.textContent()).toMatch(/Paused$/)
    expect(await statusOf()).toEqual({ workflow: "paused", runs: ["paused"] })
    await expect.poll(() => button("Run").isEnabled()).toBe(true)
    expect(await button("Pause").isDisabled()).toBe(true)
    await page
      .getByRole("region", { name: /^Paused/ })
      .getByRole("button", { name, exact: true })
      .waitFor()

    // Run again resumes the same run.
    await button("Run").click()
    await notice.filter({ hasText: `Run ${run!.run_id} resumed.` }).waitFor()
    await expect.poll(() => heading.textContent()).toMatch(/Live$/)
    expect(await statusOf()).toEqual({ workflow: "live", runs: ["running"] })

    await button("Pause").click()
    await notice.filter({ hasText: "Paused: calls in flight will finish." }).waitFor()
    await button("Retire").click()
    await button("Yes, retire").click()
    await notice.filter({ hasText: "Retired." }).waitFor()
    await expect.poll(() => heading.textContent()).toMatch(/Retired$/)
    const retired = await statusOf()
    expect(retired.workflow).toBe("retired")
    expect(retired.runs).not.toContain("running")
    for (const label of ["Run", "Pause", "Retire"]) expect(await offered(button(label)), label).toBe(false)
    // Nothing left to edit, and the API refuses a run too.
    expect(await page.getByRole("form", { name: "Workflow settings" }).count()).toBe(0)
    await page
      .getByRole("region", { name: /^Retired/ })
      .getByRole("button", { name, exact: true })
      .waitFor()
    const rerun = await call("POST", `/api/workflows/${id}/run`)
    expect(rerun).toMatchObject({ status: 409, body: { code: "WORKFLOW_RETIRED" } })
    expect(problems).toEqual([])
  }, 60_000)

  it("shows a finished run's results per target with its analysis, and downloads them as the API's CSV", async () => {
    // A workflow with two extracted fields, run on the simulator: +1…43 agrees, +1…46 declines.
    const created = await call("POST", "/api/workflows", { nl_prompt: "Ask lapsed members to rejoin the gym." })
    expect(created.status).toBe(201)
    const { id, name } = created.body as { id: number; name: string }
    const fields = [
      { name: "rejoined", type: "boolean", description: "did they agree to rejoin" },
      { name: "plan", type: "enum", description: "the plan they chose", enum: ["monthly", "yearly"] },
    ]
    expect((await call("PUT", `/api/workflows/${id}`, { rule_book: { analysis: { fields } } })).status).toBe(200)
    const rows = [
      { phone: "+12025550143", name: "Ann <b>Lee</b>" },
      { phone: "+12025550146", name: "=Bo" },
    ]
    expect((await call("POST", `/api/workflows/${id}/audience`, { rows })).status).toBe(200)
    expect(
      (await call("PUT", `/api/workflows/${id}/compliance`, { consent_attestation_text: "Opted in." })).status,
    ).toBe(200)
    const started = await call("POST", `/api/workflows/${id}/run`)
    expect(started.status).toBe(201)
    const runId = started.body.run_id as number
    const results = await eventually(
      async () => (await call("GET", `/api/runs/${runId}/results`)).body,
      (b) => b.run_status === "completed" && b.results.every((r: Json) => r.analysis_status === "done"),
      30_000,
    )
    const [ann, bo] = results.results as Json[]
    expect(ann).toMatchObject({ outcome: "agreed", goal_met: true, sentiment: "positive" })
    expect(bo).toMatchObject({ outcome: "declined", goal_met: false, sentiment: "negative" })

    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Campaigns" }).waitFor()
    await choose(name)
    await section("Results")
    const runs = detail().getByRole("region", { name: "Runs and results" })
    const runRow = runs.getByRole("row").filter({ has: page.getByRole("cell", { name: String(runId), exact: true }) })
    await runRow.waitFor()
    expect(await runRow.getByRole("cell").allTextContents()).toEqual([
      String(runId),
      expect.any(String),
      "Finished",
      "2 of 2",
      "2",
      "Show resultsDownload CSV",
    ])
    await runRow.getByRole("button", { name: "Show results" }).click()

    // One row per target, as the API's JSON page has it, the names as text (not markup).
    const table = runs.getByRole("region", { name: `Results of run ${runId}` }).getByRole("table")
    await table.waitFor()
    const headers = await table.getByRole("columnheader").allTextContents()
    expect(headers).toEqual([
      "Name",
      "Phone",
      "Outcome",
      "Attempts",
      "Talk time",
      "Cost",
      "Goal met",
      "Sentiment",
      "Summary",
      "Agreed value",
      "Call back",
      "rejoined",
      "plan",
    ])
    const body = table.locator("tbody tr")
    await expect.poll(() => body.count()).toBe(2)
    const cells = async (i: number) => body.nth(i).getByRole("cell").allTextContents()
    const money = (minor: number) => `$${(minor / 100).toFixed(2)}`
    const talk = (s: number) => `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`
    const words: Record<string, string> = {
      agreed: "Agreed",
      declined: "Declined",
      positive: "Positive",
      negative: "Negative",
    }
    for (const [i, r] of [ann!, bo!].entries())
      expect(await cells(i)).toEqual([
        r.name,
        r.phone,
        words[r.outcome],
        String(r.attempts),
        talk(r.talk_seconds),
        money(r.cost_minor),
        r.goal_met ? "yes" : "no",
        words[r.sentiment],
        r.summary,
        "—",
        "—",
        r.fields.rejoined ? "yes" : "no",
        "—",
      ])
    expect(await table.locator("b").count()).toBe(0)
    await runs.evaluate((el) => el.scrollIntoView({ block: "start" }))
    await screenshot(page, "campaigns-results")

    // The download is the API's CSV of the run, byte for byte (the session cookie carries it).
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      runRow.getByRole("link", { name: "Download CSV" }).click(),
    ])
    expect(download.suggestedFilename()).toBe(`run-${runId}-results.csv`)
    const saved = await download.path()
    const csv = await api(srv).call("GET", `/api/runs/${runId}/results?format=csv`, { token: s.token })
    expect(csv.status).toBe(200)
    const expected = await csv.text()
    expect(readFileSync(saved!, "utf8")).toBe(expected)
    // The formula-looking name is defused in the file, as the CSV section of the README says.
    expect(expected).toContain(",'=Bo,")
    expect(problems).toEqual([])
  }, 60_000)
})
