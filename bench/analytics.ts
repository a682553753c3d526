// bench/analytics: GET /api/workflows/{id}/analytics over a campaign of 1,000,000 calls (30 days, four
// zone prefixes, 40% answered with analyses, sampled audio turns) through a real api process on real
// PostgreSQL, against GET /api/workflows/{id} and against the direct reads of calls the rollups replaced
// (migration 0057), in the same run; and what the rollups' triggers cost the writes of calls.
import { request } from "node:http"
import { loadavg } from "node:os"
import * as repo from "../src/analytics/analytics.repo.js"
import type { Sql } from "../src/platform/Db.js"
import { machine, record, withBenchServer } from "./lib.js"

const CALLS = Number(process.env.BENCH_ANALYTICS_CALLS ?? 1_000_000)
const TARGETS = Math.max(1, Math.floor(CALLS / 5))
const ROUNDS = 15
const OLD_ROUNDS = 3
const DAY_MS = 86_400_000

const START = performance.now()
const step = (what: string) => process.stdout.write(`  ${((performance.now() - START) / 1000).toFixed(1)} s: ${what}\n`)
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!

function timedGet(url: string, bearer: string): Promise<number> {
  const t0 = performance.now()
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${bearer}` } })
    req.on("error", reject)
    req.on("response", (res) => {
      if (res.statusCode !== 200) reject(new Error(`${url} answered ${res.statusCode}`))
      res.on("error", reject)
      res.resume()
      res.on("end", () => resolve(performance.now() - t0))
    })
    req.end()
  })
}

async function series(url: string, token: string): Promise<{ p50: number; p95: number }> {
  await timedGet(url, token) // warm-up
  const ms: number[] = []
  for (let i = 0; i < ROUNDS; i++) ms.push(await timedGet(url, token))
  return { p50: pct(ms, 0.5), p95: pct(ms, 0.95) }
}

/** Whether the run had the machine to itself: say so with BENCH_ALONE=1 (tests or other work beside it otherwise). */
const ALONE =
  process.env.BENCH_ALONE === "1"
    ? "alone on the machine (no tests, helpers or other benches running),"
    : "not alone on the machine (other work ran beside it),"

export async function benchAnalytics(): Promise<void> {
  await withBenchServer("analytics", { country: "US" }, async ({ url, sql, pgVersion, tenantId: t, token }) => {
    step("server up")
    const [w] = await sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt) values (${t}, 'bench', 'priya', 'bench') returning id`
    const [run] = await sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, status) values (${t}, ${w!.id}, 'completed') returning id`
    const wid = w!.id
    const runId = run!.id
    // Four zone prefixes: New York, Los Angeles, Chicago, India (+05:30).
    await sql`
      insert into audience_targets (tenant_id, workflow_id, phone_e164)
      select ${t}, ${wid}, (array['+1202', '+1213', '+1312', '+9198'])[1 + i % 4] || lpad(i::text, 7, '0')
      from generate_series(1, ${TARGETS}::int) i`
    await sql`
      insert into run_targets (tenant_id, run_id, target_id, phone_e164, status, attempts)
      select ${t}, ${runId}, id, phone_e164, 'done', 5 from audience_targets where workflow_id = ${wid}`
    step(`seeded ${TARGETS} targets`)
    // Five attempts per target, spread over the last 30 days; no ended_at, so the server's analysis
    // sweep leaves them be. 40% answered, of which a quarter reach a voicemail. Through the triggers, an
    // attempt a statement.
    const seed0 = performance.now()
    for (let a = 1; a <= 5; a++)
      await sql`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, outcome, connected_seconds, cost_minor, started_at, answered_at)
      select ${t}, ${runId}, ${wid}, rt.id, rt.target_id, a, rt.phone_e164, 'sim', 'bench', 'ended',
        case when h % 10 >= 4 then (array['no_answer', 'busy', 'failed'])[1 + h % 3]
          when h % 10 = 0 then 'voicemail' else (array['agreed', 'declined', 'callee_hung_up'])[1 + h % 3] end,
        case when h % 10 < 4 then h % 120 end, 10 + h % 200, ts, case when h % 10 < 4 then ts end
      from run_targets rt
      cross join (select ${a}::int as a) aa
      cross join lateral (select abs(hashint8(rt.id * 8 + a)) as h) hh
      cross join lateral (select now() - (h % (29 * 86400)) * interval '1 second' as ts) tt
      where rt.run_id = ${runId}`
    const seedCallsMs = performance.now() - seed0
    step(`seeded ${CALLS} calls in ${(seedCallsMs / 1000).toFixed(1)} s`)
    await sql`
      insert into call_analyses (call_id, tenant_id, run_id, status, goal_met, charged_minor, analyzed_at)
      select id, ${t}, ${runId}, 'done', id % 3 = 0, 2, now() from calls
      where workflow_id = ${wid} and answered_at is not null and outcome <> 'voicemail'`
    // Audio turns for 1 call in 20 answered: six agent turns each with a latency (and the callee's between).
    await sql`
      insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at, latency_ms)
      select ${t}, ${runId}, c.target_id, c.id, row_number() over (), k,
        case when k % 2 = 0 then 'agent' else 'callee' end, 'x', c.started_at + k * interval '5 seconds',
        case when k % 2 = 0 then jsonb_build_object('total', 300 + abs(hashint8(c.id * 16 + k)) % 1200) end
      from calls c cross join generate_series(1, 12) k
      where c.workflow_id = ${wid} and c.answered_at is not null and c.id % 20 = 0`
    // A few calls still in flight (outcome null: read from calls, not rolled up), in the last ten minutes.
    await sql`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, started_at)
      select ${t}, ${runId}, ${wid}, rt.id, rt.target_id, 6, rt.phone_e164, 'sim', 'bench', 'dialing',
        now() - (rt.id % 600) * interval '1 second'
      from run_targets rt where rt.run_id = ${runId} order by rt.id limit 300`
    await sql`vacuum analyze calls`
    await sql`vacuum analyze call_analyses`
    await sql`vacuum analyze turns`
    // The rollups' rows were each rewritten a few times by the seeding; autovacuum would get to them.
    await sql`vacuum analyze call_rollups_grid`
    await sql`vacuum analyze call_rollups_outcomes`
    await sql`vacuum analyze analytics_targets`
    await sql`analyze`
    const [counts] = await sql<[{ calls: number; turns: number; analyses: number }]>`
      select (select count(*)::int from calls) as calls, (select count(*)::int from turns) as turns,
        (select count(*)::int from call_analyses) as analyses`
    step(`seeded and vacuumed: ${JSON.stringify(counts)}`)

    const base = await series(`${url}/api/workflows/${wid}`, token)
    const now = Date.now()
    const ranges = [
      { name: "24 hours", from: new Date(now - DAY_MS), to: new Date(now), calls: "~34,000 calls" },
      {
        name: "30 days",
        from: new Date(now - 30 * DAY_MS),
        to: new Date(now),
        calls: `all ${CALLS.toLocaleString("en")} calls`,
      },
      {
        name: "400 days",
        from: new Date(now - 400 * DAY_MS),
        to: new Date(now),
        calls: "the same calls, 400 days of slots",
      },
      // Inside the campaign: its targets' calls lie on both sides, so the funnel reads their rows (the worst case).
      {
        name: "10 days inside",
        from: new Date(now - 20 * DAY_MS),
        to: new Date(now - 10 * DAY_MS),
        calls: "~345,000 calls, days 10–20 ago",
      },
    ]
    // The old path: the five direct reads of calls in parallel on the pool, as the service made them before
    // migration 0057; the new path's four reads the same way, so the ratio is the database's alone.
    const oldReads = (r: repo.Range) =>
      Promise.all([
        repo.direct.dialed(sql, wid, r),
        repo.direct.answered(sql, wid, r),
        repo.direct.outcomesPerDay(sql, wid, r),
        repo.direct.dialsPerSlotAndPrefix(sql, wid, r),
        repo.direct.latencySorted(sql, wid, r),
      ])
    const newReads = (r: repo.Range) => {
      const p = repo.slotPlan(r)
      return Promise.all([
        repo.funnel(sql, wid, r),
        repo.daysOfSlots(sql, wid, p),
        repo.prefixesOfSlots(sql, wid, p),
        repo.replyLatency(sql, wid, r),
      ])
    }
    const timed = async (f: () => Promise<unknown>, rounds: number) => {
      await f()
      const ms: number[] = []
      for (let i = 0; i < rounds; i++) {
        const t0 = performance.now()
        await f()
        ms.push(performance.now() - t0)
      }
      return { p50: pct(ms, 0.5), p95: pct(ms, 0.95) }
    }
    const rows: string[] = []
    for (const g of ranges) {
      const r = { from: g.from, to: g.to }
      const http = await series(
        `${url}/api/workflows/${wid}/analytics?from=${g.from.toISOString()}&to=${g.to.toISOString()}`,
        token,
      )
      const fresh = await timed(() => newReads(r), ROUNDS)
      const old = await timed(() => oldReads(r), OLD_ROUNDS)
      step(`${g.name}: http ${http.p50.toFixed(0)} ms, reads ${fresh.p50.toFixed(0)} ms, old ${old.p50.toFixed(0)} ms`)
      const f = (x: number) => x.toFixed(1)
      rows.push(
        `| ${g.name} (${g.calls}) | ${f(http.p50)} / ${f(http.p95)} | ${f(fresh.p50)} / ${f(fresh.p95)} | ` +
          `${f(old.p50)} / ${f(old.p95)} | ${(old.p50 / fresh.p50).toFixed(0)}× |`,
      )
    }
    // Where the old path's 24 hours went.
    const dayRange = { from: new Date(now - DAY_MS), to: new Date(now) }
    const explain = async (name: string, q: string, params: unknown[]) => {
      const plan = await sql.unsafe(`explain (analyze, buffers) ${q}`, params as never[])
      process.stdout.write(`-- ${name}\n${plan.map((p) => p["QUERY PLAN"]).join("\n")}\n`)
    }
    const old24 = [
      ["dialed", repo.direct.dialed],
      ["answered", repo.direct.answered],
      ["outcomesPerDay", repo.direct.outcomesPerDay],
      ["dialsPerSlotAndPrefix", repo.direct.dialsPerSlotAndPrefix],
      ["replyLatency", repo.direct.latencySorted],
    ] as const
    const perRead: string[] = []
    for (const [name, read] of old24) {
      const t0 = performance.now()
      await read(sql, wid, dayRange)
      perRead.push(`${name} ${(performance.now() - t0).toFixed(0)} ms`)
    }
    process.stdout.write(`old reads alone, 24 hours: ${perRead.join(", ")}\n`)
    // Where the new path's 30 days go: each read alone.
    const monthPlan = repo.slotPlan({ from: new Date(now - 30 * DAY_MS), to: new Date(now) })
    const insideRange = { from: new Date(now - 20 * DAY_MS), to: new Date(now - 10 * DAY_MS) }
    const new30 = [
      ["funnel", () => repo.funnel(sql, wid, monthPlan)],
      ["daysOfSlots", () => repo.daysOfSlots(sql, wid, monthPlan)],
      ["prefixesOfSlots", () => repo.prefixesOfSlots(sql, wid, monthPlan)],
      ["replyLatency", () => repo.replyLatency(sql, wid, monthPlan)],
      ["funnel (10 days inside)", () => repo.funnel(sql, wid, insideRange)],
      ["replyLatency (10 days inside)", () => repo.replyLatency(sql, wid, insideRange)],
    ] as const
    const perNewRead: string[] = []
    for (const [name, read] of new30) {
      const t = await timed(read, 5)
      perNewRead.push(`${name} ${t.p50.toFixed(0)} ms`)
    }
    process.stdout.write(`new reads alone, 30 days (p50 of 5): ${perNewRead.join(", ")}\n`)
    if (process.env.BENCH_ANALYTICS_EXPLAIN === "1") {
      await explain(
        "new funnel, 30 days",
        `select count(*) filter (where first_answered_at >= $2 or last_answered_at >= $2) from analytics_targets
          where workflow_id = $1 and first_dialed_at < $3 and last_dialed_at >= $2`,
        [wid, monthPlan.from, monthPlan.to],
      )
      await explain(
        "old dialed, 24 hours",
        `select (select count(*)::int from audience_targets where workflow_id = $1) as targets,
          count(distinct target_id)::int, coalesce(sum(cost_minor), 0)::bigint from calls
          where workflow_id = $1 and started_at >= $2 and started_at < $3`,
        [wid, dayRange.from, dayRange.to],
      )
      await explain(
        "reply latency, 24 hours",
        `select count(*) from runs ru join turns t on t.run_id = ru.id where ru.workflow_id = $1 and t.at >= $2
          and t.at < $3 and t.latency_ms is not null and t.speaker = 'agent'`,
        [wid, dayRange.from, dayRange.to],
      )
    }
    const [sizes] = await sql<[{ grid: number; outcomes: number; targets: number }]>`
      select (select count(*)::int from call_rollups_grid where workflow_id = ${wid}) as grid,
        (select count(*)::int from call_rollups_outcomes where workflow_id = ${wid}) as outcomes,
        (select count(*)::int from analytics_targets where workflow_id = ${wid}) as targets`
    const writes = await writeCost(sql, t)
    const load = loadavg()
      .map((x) => x.toFixed(2))
      .join(" / ")
    const table =
      `| range | HTTP p50 / p95 ms | new reads p50 / p95 ms | old reads p50 / p95 ms | old ÷ new |\n` +
      `|---|---|---|---|---|\n${rows.join("\n")}\n`
    process.stdout.write(
      `${table}baseline GET /api/workflows/{id}: ${base.p50.toFixed(1)} ms\n${writes}\nload ${load}\n`,
    )
    record(
      "analytics",
      `## analytics\n\n${machine()}, PostgreSQL ${pgVersion}, one --role all process; ${ALONE} ` +
        `load average (1/5/15 min) at the end: ${load}. One workflow of ` +
        `${TARGETS.toLocaleString("en")} targets and ${counts.calls.toLocaleString("en")} calls over 30 days ` +
        `(${counts.analyses.toLocaleString("en")} analyses, ${counts.turns.toLocaleString("en")} turns), seeded ` +
        `through the triggers in ${(seedCallsMs / 1000).toFixed(1)} s (an attempt, ${TARGETS.toLocaleString("en")} ` +
        `calls, a statement): ${sizes.grid.toLocaleString("en")} grid rollup rows (slot × prefix), ` +
        `${sizes.outcomes.toLocaleString("en")} outcome rollup rows (slot × outcome), ` +
        `${sizes.targets.toLocaleString("en")} target rows.\n\n` +
        `HTTP: ${ROUNDS} requests in a row after a warm-up (\`GET /api/workflows/{id}\`, one indexed row, ` +
        `${base.p50.toFixed(1)} ms p50 in the same run). Reads: the service's reads in parallel on the bench's ` +
        `pool, new (rollups, migrations 0057 and 0058) ${ROUNDS} times and old (the direct reads of calls of ` +
        `migration 0055) ${OLD_ROUNDS} times.\n\n${table}\nOld reads alone over 24 hours: ${perRead.join(", ")}. ` +
        `New reads alone over 30 days (p50 of 5): ${perNewRead.join(", ")}.\n\n` +
        `${writes}\n\n${NOTES}`,
    )
  })
}

/** Read with the figures (kept by every run: what one run cannot show). */
const NOTES =
  "Where the time goes (EXPLAIN ANALYZE on an earlier run, same data): the old 24 hours were a bitmap heap " +
  "scan visiting one heap page per call (16,873 pages for 34,907 calls: calls_workflow_started_idx does not " +
  "cover) plus the audience count, a seq scan of audience_targets; not a wrong plan. The new path reads " +
  "each view's own rollup of whole slots (slot × prefix for the grid, ~11,100 rows for these 30 days, the " +
  "largest read at ~47 ms alone; slot × outcome for the days and spend, ~19,500, ~21 ms), the audience " +
  "count kept per workflow (one row), the reply latency from per-day counts of each value to three " +
  "significant figures plus the partial days' turns (~30 ms alone, against a sort of ~121,000 agent turns " +
  "before), and the funnel: for a range holding every target's first and last calls (the 30 and 400 days " +
  "here) the workflow's totals after two index probes (under 1 ms, against ~130 ms for the scan of every " +
  "target row before); for a range inside the campaign the target rows whose last call is not before it " +
  "(~74 ms alone for days 10–20 ago, nearly every target here, since each has five calls spread over the " +
  "month). The write phases are one pass each and noisy on a shared machine (an unrelated update cannot be " +
  "faster with the triggers); the turns' trigger costs a statement of audio turns one upsert per day and " +
  "value."

const WRITE_CALLS = 20_000
const BATCH = 10
const TRIGGERS = [
  "calls calls_analytics_ins",
  "calls calls_analytics_upd",
  "calls calls_analytics_del",
  "call_analyses call_analyses_analytics_ins",
  "call_analyses call_analyses_analytics_upd",
  "call_analyses call_analyses_analytics_del",
  "turns turns_latency_ins",
  "turns turns_latency_upd",
  "turns turns_latency_del",
]

/**
 * What the rollups cost the writes of calls (no ended_at, and analyses due never, so the server's analysis
 * worker leaves them be): a call's life (its insert, 40% answered, its end, an unrelated
 * update, its analysis queued and done) for WRITE_CALLS calls in statements of BATCH, timed with the
 * triggers and their two indexes on calls, and without them (triggers disabled, indexes dropped), on
 * workflows of their own in the same database. Returns a paragraph for RESULTS.md.
 */
async function writeCost(sql: Sql, t: number): Promise<string> {
  const pass = async (): Promise<Record<string, number>> => {
    const [w] = await sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt) values (${t}, 'writes', 'priya', 'bench')
      returning id`
    const [run] = await sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, status) values (${t}, ${w!.id}, 'completed') returning id`
    await sql`
      insert into audience_targets (tenant_id, workflow_id, phone_e164)
      select ${t}, ${w!.id}, (array['+1202', '+1213', '+1312', '+9198'])[1 + i % 4] || lpad(i::text, 7, '0')
      from generate_series(1, ${WRITE_CALLS}::int) i`
    const rts = await sql<{ id: number; target_id: number; phone_e164: string }[]>`
      insert into run_targets (tenant_id, run_id, target_id, phone_e164, status, attempts)
      select ${t}, ${run!.id}, id, phone_e164, 'done', 1 from audience_targets where workflow_id = ${w!.id}
      returning id, target_id, phone_e164`
    const ms: Record<string, number> = {}
    const phase = async (name: string, each: (chunk: number[]) => Promise<unknown>, ids: number[]) => {
      const t0 = performance.now()
      for (let i = 0; i < ids.length; i += BATCH) await each(ids.slice(i, i + BATCH))
      ms[name] = performance.now() - t0
    }
    const callIds: number[] = []
    await phase(
      "insert",
      async (chunk) => {
        const rows = await sql<{ id: number }[]>`
          insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
            owner_instance, status)
          select ${t}, ${run!.id}, ${w!.id}, rt.id, rt.target_id, 1, rt.phone_e164, 'sim', 'bench', 'dialing'
          from run_targets rt where rt.id = any(${chunk}::bigint[])
          returning id`
        for (const r of rows) callIds.push(Number(r.id))
      },
      rts.map((r) => Number(r.id)),
    )
    const answered = callIds.filter((id) => id % 10 < 4)
    await phase(
      "answer",
      (chunk) => sql`update calls set status = 'connected', answered_at = now() where id = any(${chunk}::bigint[])`,
      answered,
    )
    await phase(
      "end",
      (chunk) => sql`
        update calls set status = 'ended', cost_minor = 10 + id % 100,
          connected_seconds = case when answered_at is not null then id % 120 end,
          outcome = case when answered_at is null then 'no_answer' when id % 3 = 0 then 'agreed' else 'declined' end
        where id = any(${chunk}::bigint[])`,
      callIds,
    )
    await phase(
      "unrelated update",
      (chunk) => sql`update calls set owner_instance = 'other' where id = any(${chunk}::bigint[])`,
      callIds,
    )
    // An answered call's audio turns: six, the agent's three with a latency (migration 0058 counts those).
    await phase(
      "turns",
      (chunk) => sql`
        insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at, latency_ms)
        select ${t}, ${run!.id}, c.target_id, c.id, c.id * 10 + k, k,
          case when k % 2 = 0 then 'agent' else 'callee' end, 'x', now(),
          case when k % 2 = 0 then jsonb_build_object('total', 300 + (c.id * k) % 1200) end
        from calls c cross join generate_series(1, 6) k
        where c.id = any(${chunk}::bigint[])`,
      answered,
    )
    await phase(
      "analysis queued",
      (chunk) => sql`
        insert into call_analyses (call_id, tenant_id, run_id, status, next_attempt_at)
        select id, ${t}, ${run!.id}, 'pending', 'infinity'
        from unnest(${chunk}::bigint[]) id`,
      answered,
    )
    await phase(
      "analysis done",
      (chunk) => sql`
        update call_analyses set status = 'done', goal_met = call_id % 2 = 0, charged_minor = 2, analyzed_at = now()
        where call_id = any(${chunk}::bigint[])`,
      answered,
    )
    return ms
  }
  const toggle = async (on: boolean) => {
    for (const tr of TRIGGERS)
      await sql.unsafe(`alter table ${tr.replace(" ", ` ${on ? "enable" : "disable"} trigger `)}`)
    if (on) {
      await sql`create index calls_target_idx on calls (target_id)`
      await sql`create index calls_in_progress_idx on calls (workflow_id, started_at) where outcome is null`
    } else {
      await sql`drop index calls_target_idx`
      await sql`drop index calls_in_progress_idx`
    }
  }
  step("write cost: without the triggers")
  await toggle(false)
  const without = await pass()
  await toggle(true)
  step("write cost: with the triggers")
  const withT = await pass()
  const rows = Object.keys(withT).map((k) => {
    const answeredCalls = Math.round(WRITE_CALLS * 0.4)
    const n =
      k === "turns" ? answeredCalls * 6 : k === "answer" || k.startsWith("analysis") ? answeredCalls : WRITE_CALLS
    const rate = (x: number) => Math.round((n / x) * 1000).toLocaleString("en")
    return (
      `| ${k} (${n.toLocaleString("en")} rows) | ${rate(without[k]!)} | ${rate(withT[k]!)} | ` +
      `${(withT[k]! / without[k]!).toFixed(2)} |`
    )
  })
  const total = (m: Record<string, number>) => Object.values(m).reduce((a, b) => a + b, 0)
  return (
    `Write cost of the triggers: each phase of ${WRITE_CALLS.toLocaleString("en")} calls' lives in statements of ` +
    `${BATCH} rows on one connection, without the triggers (disabled, with calls_target_idx and ` +
    `calls_in_progress_idx dropped) and then with them, on a fresh workflow each, beside the 1,000,000 calls. ` +
    `Rows per second:\n\n| phase | without | with | time ratio |\n|---|---|---|---|\n${rows.join("\n")}\n\n` +
    `A call's whole life: ${(total(withT) / total(without)).toFixed(2)}× the time without the triggers ` +
    `(${((total(withT) - total(without)) / WRITE_CALLS).toFixed(2)} ms more per call).`
  )
}
