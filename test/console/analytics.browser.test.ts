// A campaign's Analytics section in Chromium: on a campaign with seeded calls (New York numbers, two days
// ago and yesterday, with reply latencies and costs), the funnel's counts and shares, the heat map's cells,
// the latency percentiles and the spend read on the page equal GET …/analytics's JSON for the default
// last 30 days, and again after the range is moved. Experiments: one made by POST …/experiments, with
// the seeded calls and forty more put in its arms so that the data tells them apart, shows its
// statement, arms, intervals, comparison and "Better" badge as the real GET …/experiments reads it out.
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { assertBrowser, launchChromium, screenshot, skipBrowser, watchProblems } from "./browser.support.js"

const STEP_MS = 15_000
const DAY_MS = 86_400_000

type Json = Record<string, any>

// The page's formatting (console/pages/analytics.format.ts), restated: the test computes what it must show.
const percent = (x: number | null) => (x === null ? "—" : `${(x * 100).toFixed(1)}%`)
const share = (n: number, of: number) => (of > 0 ? percent(n / of) : "—")
const interval = (lo: number, hi: number) => `[${percent(lo)}–${percent(hi)}]`
const points = (d: number) => `${d >= 0 ? "+" : "-"}${Math.abs(d * 100).toFixed(1)} pts`
const money = (minor: number | null, currency: string) =>
  minor === null ? "—" : new Intl.NumberFormat("en-US", { style: "currency", currency }).format(minor / 100)
const millis = (ms: number | null) => (ms === null ? "—" : `${Math.round(ms)} ms`)
const isoDay = (t: number) => new Date(t).toISOString().slice(0, 10)

const FUNNEL = [
  ["targets", undefined],
  ["dialed", "targets"],
  ["answered", "dialed"],
  ["human", "answered"],
  ["voicemail", "answered"],
  ["talked_30s", "human"],
  ["agreed", "talked_30s"],
] as const

describe.skipIf(skipBrowser)("a campaign's Analytics in Chromium", () => {
  let srv: TestServer
  let browser: Browser
  let page: Page
  let problems: string[]
  let owner: Session
  let workflowId = 0
  let workflowName = ""

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await api(srv).call(method, path, { token: owner.token, ...(body !== undefined && { body }) })
    return { status: res.status, body: (await res.json()) as Json }
  }

  /** Seeds a finished run's calls, as test/workflows/analytics.test.ts does (no ended_at: no analysis sweep). */
  async function seed(tenantId: number) {
    const sql = srv.sql
    const [run] = await sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, status) values (${tenantId}, ${workflowId}, 'completed') returning id`
    const phones = ["+12025550101", "+12025550102", "+12025550103", "+12025550104", "+12025550105"]
    const targets: { id: number; rt: number; phone: string }[] = []
    for (const phone of phones) {
      const [t] = await sql<[{ id: number }]>`
        insert into audience_targets (tenant_id, workflow_id, phone_e164) values (${tenantId}, ${workflowId}, ${phone})
        returning id`
      const [rt] = await sql<[{ id: number }]>`
        insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
        values (${tenantId}, ${run!.id}, ${t!.id}, ${phone}, 'done') returning id`
      targets.push({ id: Number(t!.id), rt: Number(rt!.id), phone })
    }
    const day = (ago: number, hh: number) =>
      new Date(Date.parse(`${isoDay(Date.now() - ago * DAY_MS)}T00:00:00Z`) + hh * 3_600_000).toISOString()
    const calls = [
      { target: 0, attempt: 1, at: day(2, 14.2), answered: false, outcome: "no_answer", secs: null, cost: 0 },
      { target: 0, attempt: 2, at: day(1, 15), answered: true, outcome: "agreed", secs: 45, cost: 120 },
      { target: 1, attempt: 1, at: day(2, 14.5), answered: true, outcome: "voicemail_left", secs: 20, cost: 40 },
      { target: 2, attempt: 1, at: day(2, 14.7), answered: true, outcome: "declined", secs: 31, cost: 60 },
      { target: 3, attempt: 1, at: day(1, 18), answered: true, outcome: "callee_hung_up", secs: 12, cost: 30 },
    ]
    let talk = 0
    for (const c of calls) {
      const t = targets[c.target]!
      const [row] = await sql<[{ id: number }]>`
        insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
          owner_instance, status, outcome, connected_seconds, cost_minor, started_at, answered_at)
        values (${tenantId}, ${run!.id}, ${workflowId}, ${t.rt}, ${t.id}, ${c.attempt}, ${t.phone}, 'sim', 'test',
          'ended', ${c.outcome}, ${c.secs}, ${c.cost}, ${c.at}, ${c.answered ? c.at : null})
        returning id`
      if (c.outcome === "declined") talk = Number(row!.id)
    }
    for (let i = 1; i <= 10; i++)
      await sql`
        insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at, latency_ms)
        values (${tenantId}, ${run!.id}, 0, ${talk}, ${i}, ${i}, 'agent', 'x', ${day(2, 14.7 + i / 3600)},
          ${sql.json({ total: i * 110, model: i * 50 })})`
  }

  /** The page's next GET …/analytics and the JSON it got. */
  const analyticsAnswer = () =>
    page.waitForResponse(
      (r) => r.request().method() === "GET" && new URL(r.url()).pathname === `/api/workflows/${workflowId}/analytics`,
    )

  const testId = (id: string) => page.getByTestId(id)
  const text = async (id: string) => ((await testId(id).textContent()) ?? "").trim()

  /** Every figure of the funnel, the latency and the spend as the page shows them, and as `a` says they should. */
  async function expectFigures(a: Json) {
    const f = a.funnel as Record<string, number>
    for (const [step, of] of FUNNEL) {
      expect(await text(`funnel-${step}-count`), step).toBe(String(f[step]))
      if (of !== undefined) expect(await text(`funnel-${step}-share`), step).toBe(share(f[step]!, f[of]!))
    }
    expect(await text("latency-n")).toBe(String(a.latency.n))
    for (const p of ["p50", "p90", "p99"]) expect(await text(`latency-${p}`)).toBe(millis(a.latency[p]))
    expect(await text("spend")).toBe(money(a.spend_minor, a.currency))
  }

  beforeAll(async () => {
    assertBrowser()
    ;[srv, browser] = await Promise.all([startTestServer(), launchChromium()])
    owner = await api(srv).signup({ country: "US" })
    const created = await call("POST", "/api/workflows", { nl_prompt: "Ask lapsed members to rejoin the gym." })
    expect(created.status).toBe(201)
    workflowId = created.body.id
    workflowName = created.body.name
    await seed(owner.tenantId)

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US" })
    context.setDefaultTimeout(STEP_MS)
    await context.addCookies([{ name: "svc_session", value: owner.cookie.slice("svc_session=".length), url: srv.url }])
    page = await context.newPage()
    problems = watchProblems(page, srv.url)
    await page.goto(`${srv.url}/console#/campaigns`)
    await page.getByRole("button", { name: workflowName, exact: true }).click()
    await page.getByRole("article").getByRole("heading", { level: 2 }).waitFor()
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await srv?.stop()
  })

  it("shows the funnel, a heat-map cell, latency and spend of the last 30 days as the API gives them", async () => {
    const answered = analyticsAnswer()
    await page.getByRole("tab", { name: "Analytics", exact: true }).click()
    const res = await answered
    expect(res.status()).toBe(200)
    const asked = new URL(res.url()).searchParams
    expect([asked.get("from"), asked.get("to")]).toEqual([isoDay(Date.now() - 29 * DAY_MS), isoDay(Date.now())])
    const a = (await res.json()) as Json
    // The page's own answer, and the API's to the same question asked with the owner's token.
    expect((await call("GET", `/api/workflows/${workflowId}/analytics?${asked}`)).body).toEqual(a)
    expect(a.funnel).toEqual({ targets: 5, dialed: 4, answered: 4, human: 3, voicemail: 1, talked_30s: 2, agreed: 1 })
    await testId("funnel-targets-count").waitFor()
    await expectFigures(a)

    // Every cell with dials carries connects/dials and the rate; one without dials is blank.
    const { weekdays, dials, connects } = a.hour_of_day as {
      weekdays: string[]
      dials: number[][]
      connects: number[][]
    }
    const busy = weekdays.flatMap((d, i) => dials[i]!.flatMap((n, h) => (n > 0 ? [{ d, i, h }] : [])))
    expect(busy.length).toBeGreaterThan(0)
    for (const { d, i, h } of busy) {
      const cell = testId(`heat-${d}-${h}`)
      expect(await cell.getAttribute("title")).toBe(`${connects[i]![h]}/${dials[i]![h]}`)
      expect(await cell.textContent()).toBe(`${Math.round((connects[i]![h]! / dials[i]![h]!) * 100)}%`)
    }
    const idle = weekdays.flatMap((d, i) => dials[i]!.flatMap((n, h) => (n === 0 ? [`heat-${d}-${h}`] : [])))[0]!
    expect(await testId(idle).getAttribute("title")).toBe("0/0")
    expect(await testId(idle).textContent()).toBe("")

    // The outcomes chart is drawn, its legend naming each outcome of the period.
    await page.locator("figure.chart canvas").first().waitFor()
    const legend = page.getByRole("list", { name: "Outcomes shown" }).getByRole("listitem")
    expect(await legend.count()).toBe(new Set(a.outcomes_over_time.flatMap((d: Json) => Object.keys(d.outcomes))).size)
    await screenshot(page, "campaign-analytics")
  })

  it("reads the analytics again for a range picked, and shows that answer", async () => {
    const today = isoDay(Date.now())
    const answered = analyticsAnswer()
    await page.getByLabel("First day").fill(today)
    const res = await answered
    expect(new URL(res.url()).searchParams.get("from")).toBe(today)
    const a = (await res.json()) as Json
    // Only today: none of the seeded calls, but the audience is still counted.
    expect(a.funnel).toMatchObject({ targets: 5, dialed: 0, agreed: 0 })
    await expect.poll(() => text("funnel-dialed-count")).toBe("0")
    await expectFigures(a)
    expect(await text("funnel-answered-share")).toBe("—")
    await page.getByText("No calls placed in this period.").waitFor()
  })

  /** The experiment's region on the page: its statement, arms table and comparisons equal `r`, its readout. */
  async function expectReadout(name: string, r: Json) {
    const box = page.getByRole("region", { name: new RegExp(`^${name} `) })
    await box.getByTestId("statement").waitFor()
    expect(await box.getByTestId("statement").textContent()).toBe(r.statement)
    const inBox = async (id: string) => ((await box.getByTestId(id).textContent()) ?? "").trim()
    for (const arm of r.arms) {
      expect(await inBox(`targets-${arm.name}`)).toBe(String(arm.targets))
      expect(await inBox(`calls-${arm.name}`)).toBe(String(arm.calls))
      for (const [id, v] of [
        ["connects", arm.connects],
        ["agreement", arm.agreement],
        ["goal", arm.goal_met],
        ["optouts", arm.opt_outs],
      ] as const) {
        expect(await inBox(`${id}-${arm.name}`), id).toBe(percent(v.rate))
        expect(await inBox(`${id}-${arm.name}-ci`), id).toBe(interval(v.ci_low, v.ci_high))
      }
      const talk = arm.talk_seconds_avg === null ? "—" : `${arm.talk_seconds_avg.toFixed(1)} s`
      expect(await inBox(`talk-${arm.name}`)).toBe(talk)
      expect(await inBox(`approvals-${arm.name}`)).toBe(`${arm.approvals_asked} / ${arm.approvals_granted}`)
      expect(await inBox(`cpa-${arm.name}`)).toBe(money(arm.cost_per_agreement_minor, r.currency))
      expect(await box.getByTestId(`better-${arm.name}`).count()).toBe(arm.name === r.better ? 1 : 0)
    }
    // The headline's agreement rates, its arms' and the table's, are the same numbers.
    for (const arm of r.agreement.arms) expect(await inBox(`agreement-${arm.name}`)).toBe(percent(arm.rate))
    for (const c of r.agreement.comparisons) {
      if (c.difference === null) continue
      expect(await inBox(`diff-${c.arm}`)).toBe(points(c.difference.diff))
      expect(await inBox(`diff-ci-${c.arm}`)).toBe(
        `[${points(c.difference.ci_low).replace(" pts", "")} to ${points(c.difference.ci_high)}]`,
      )
    }
    const plot = box.getByRole("img", { name: /^Agreement rate with 95% intervals/ })
    for (const arm of r.agreement.arms)
      expect(await plot.getAttribute("aria-label")).toContain(`${arm.name}: ${percent(arm.rate)}`)
    return box
  }

  it("shows an experiment made by POST …/experiments as GET reads it out, its better arm marked", async () => {
    const made = await call("POST", `/api/workflows/${workflowId}/experiments`, {
      name: "Voice test",
      arms: [{ name: "Control" }, { name: "Kai", persona: "kai" }],
      seed: 7,
    })
    expect(made.status, JSON.stringify(made.body)).toBe(201)
    // The seeded calls as if placed in the experiment: the first two targets in the control, the rest in Kai;
    // then twenty more reached targets an arm, of whom 3 agreed in the control and 18 with Kai.
    await srv.sql`
      update calls set experiment_id = ${made.body.id},
        arm = case when phone_e164 in ('+12025550101', '+12025550102') then 'Control' else 'Kai' end
      where workflow_id = ${workflowId}`
    const [run] = await srv.sql<[{ id: number }]>`select id::int from runs where workflow_id = ${workflowId} limit 1`
    const at = new Date(Date.now() - 3 * DAY_MS)
    for (const [arm, agreed] of [
      ["Control", 3],
      ["Kai", 18],
    ] as const)
      for (let i = 0; i < 20; i++) {
        const phone = `+1202555${arm === "Control" ? 2 : 3}${String(i).padStart(3, "0")}`
        const [t] = await srv.sql<[{ id: number }]>`
          insert into audience_targets (tenant_id, workflow_id, phone_e164)
          values (${owner.tenantId}, ${workflowId}, ${phone}) returning id::int`
        const [rt] = await srv.sql<[{ id: number }]>`
          insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
          values (${owner.tenantId}, ${run.id}, ${t.id}, ${phone}, 'done') returning id::int`
        await srv.sql`
          insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
            owner_instance, status, outcome, connected_seconds, cost_minor, started_at, answered_at, experiment_id, arm)
          values (${owner.tenantId}, ${run.id}, ${workflowId}, ${rt.id}, ${t.id}, 1, ${phone}, 'sim', 'test', 'ended',
            ${i < agreed ? "agreed" : "declined"}, 40, 50, ${at}, ${at}, ${made.body.id}, ${arm})`
      }
    // The section is read afresh when opened again.
    await page.getByRole("tab", { name: "Results", exact: true }).click()
    const listed = page.waitForResponse(
      (r) => new URL(r.url()).pathname === `/api/workflows/${workflowId}/experiments` && r.request().method() === "GET",
    )
    await page.getByRole("tab", { name: "Analytics", exact: true }).click()
    const res = await listed
    expect(res.status()).toBe(200)
    const body = (await res.json()) as { data: Json[] }
    expect(body.data.map((x) => x.name)).toEqual(["Voice test"])
    const r = body.data[0]!.readout
    expect(r.arms.map((a: Json) => [a.name, a.targets, a.calls])).toEqual([
      ["Control", 22, 23],
      ["Kai", 22, 22],
    ])
    expect([r.decided, r.better]).toEqual([true, "Kai"])
    expect(r.agreement.comparisons[0].difference.ci_low).toBeGreaterThan(0)
    const box = await expectReadout("Voice test", r)
    expect(await box.getByTestId("better-Kai").textContent()).toBe("Better")
    await box.scrollIntoViewIfNeeded()
    await screenshot(page, "campaign-experiment")

    // At 390 px the wide parts (the heat map, the arms table) scroll in their own boxes, not the page.
    await page.setViewportSize({ width: 390, height: 844 })
    const overflow = Number(await page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))
    expect(overflow).toBeLessThanOrEqual(0)
    await page.setViewportSize({ width: 1280, height: 900 })
  })

  it("met no page error, CSP violation or 5xx", () => {
    expect(problems).toEqual([])
  })
})
