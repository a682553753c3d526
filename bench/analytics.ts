// bench/analytics: GET /api/workflows/{id}/analytics over a campaign of 1,000,000 calls (30 days, four
// zone prefixes, 40% answered with analyses, sampled audio turns) through a real api process on real
// PostgreSQL, in p50/p95 ms against GET /api/workflows/{id} (one indexed row) in the same run.
import { request } from "node:http"
import { loadavg } from "node:os"
import * as repo from "../src/analytics/analytics.repo.js"
import { machine, record, withBenchServer } from "./lib.js"

const CALLS = Number(process.env.BENCH_ANALYTICS_CALLS ?? 1_000_000)
const TARGETS = Math.max(1, Math.floor(CALLS / 5))
const ROUNDS = 15

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
    // sweep leaves them be. 40% answered, of which a quarter reach a voicemail.
    await sql`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, outcome, connected_seconds, cost_minor, started_at, answered_at)
      select ${t}, ${runId}, ${wid}, rt.id, rt.target_id, a, rt.phone_e164, 'sim', 'bench', 'ended',
        case when h % 10 >= 4 then (array['no_answer', 'busy', 'failed'])[1 + h % 3]
          when h % 10 = 0 then 'voicemail' else (array['agreed', 'declined', 'callee_hung_up'])[1 + h % 3] end,
        case when h % 10 < 4 then h % 120 end, 10 + h % 200, ts, case when h % 10 < 4 then ts end
      from run_targets rt
      cross join generate_series(1, 5) a
      cross join lateral (select abs(hashint8(rt.id * 8 + a)) as h) hh
      cross join lateral (select now() - (h % (29 * 86400)) * interval '1 second' as ts) tt
      where rt.run_id = ${runId}`
    step(`seeded ${CALLS} calls`)
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
    await sql`vacuum analyze calls`
    await sql`vacuum analyze call_analyses`
    await sql`vacuum analyze turns`
    await sql`analyze`
    const [counts] = await sql<[{ calls: number; turns: number; analyses: number }]>`
      select (select count(*)::int from calls) as calls, (select count(*)::int from turns) as turns,
        (select count(*)::int from call_analyses) as analyses`
    step(`seeded and vacuumed: ${JSON.stringify(counts)}`)

    const base = await series(`${url}/api/workflows/${wid}`, token)
    const day = await series(
      `${url}/api/workflows/${wid}/analytics?from=${new Date(Date.now() - 86_400_000).toISOString()}`,
      token,
    )
    const full = await series(`${url}/api/workflows/${wid}/analytics`, token)
    // Each read of the query path alone, one after another on one connection: where the time goes.
    const range = { from: new Date(Date.now() - 30 * 86_400_000), to: new Date() }
    const reads: Record<string, () => Promise<unknown>> = {
      dialed: () => repo.dialed(sql, wid, range),
      answered: () => repo.answered(sql, wid, range),
      outcomesPerDay: () => repo.outcomesPerDay(sql, wid, range),
      dialsPerSlotAndPrefix: () => repo.dialsPerSlotAndPrefix(sql, wid, range),
      replyLatency: () => repo.replyLatency(sql, wid, range),
    }
    const perRead: string[] = []
    for (const [name, read] of Object.entries(reads)) {
      const ms: number[] = []
      for (let i = 0; i < 4; i++) {
        const t0 = performance.now()
        await read()
        if (i > 0) ms.push(performance.now() - t0)
      }
      perRead.push(`${name} ${pct(ms, 0.5).toFixed(0)} ms`)
    }
    process.stdout.write(`reads alone (median of 3, 30 days): ${perRead.join(", ")}\n`)
    const load = loadavg()
      .map((x) => x.toFixed(2))
      .join(" / ")
    const row = (what: string, r: { p50: number; p95: number }) =>
      `| ${what} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} | ${(r.p50 / base.p50).toFixed(1)} |`
    const table =
      `| request (${ROUNDS} in a row after a warm-up) | p50 ms | p95 ms | p50 ratio |\n|---|---|---|---|\n` +
      `${row("`GET /api/workflows/{id}` (baseline: one indexed row)", base)}\n` +
      `${row("`GET /api/workflows/{id}/analytics?from=<24 h ago>` (~34,000 calls)", day)}\n` +
      `${row(`\`GET /api/workflows/{id}/analytics\` (30 days: all ${CALLS.toLocaleString("en")} calls)`, full)}\n`
    process.stdout.write(`${table}load ${load}\n`)
    record(
      "analytics",
      `## analytics\n\n${machine()}, PostgreSQL ${pgVersion}, one --role all process; load average ` +
        `(1/5/15 min) at the end: ${load}. One workflow of ${TARGETS.toLocaleString("en")} targets and ` +
        `${counts.calls.toLocaleString("en")} calls over 30 days (${counts.analyses.toLocaleString("en")} ` +
        `analyses, ${counts.turns.toLocaleString("en")} turns), vacuumed (index-only scans need the visibility map).` +
        `\n\n${table}\nFive reads in parallel on the pool's connections, each one range of ` +
        `calls_workflow_started_idx (covering) or turns_latency_idx (migration 0055); the local-time grid is ` +
        `grouped in SQL by 15-minute slot and number prefix and shifted in Node. Each read alone over the 30 ` +
        `days (median of 3, one connection): ${perRead.join(", ")}.`,
    )
  })
}
