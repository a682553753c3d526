// bench/results: GET /api/runs/{id}/results?format=csv of a 100,000-target run through a real api
// process on real PostgreSQL, in rows per second, against a bare `COPY (the same rows) TO STDOUT`
// in the same run (the analysis queue's lag behind hangups at 200 hangups/s is bench/analysis).
import { request } from "node:http"
import { loadavg } from "node:os"
import { connectPostgres } from "../src/platform/Db.js"
import { machine, record, withBenchServer } from "./lib.js"

const TARGETS = Number(process.env.BENCH_RESULTS_TARGETS ?? 100_000)
const ROUNDS = 3

const START = performance.now()
const step = (what: string) => process.stdout.write(`  ${((performance.now() - START) / 1000).toFixed(1)} s: ${what}\n`)
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Reads a whole response as fast as it comes, counting bytes and lines. */
function download(url: string, bearer: string): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now()
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${bearer}` } })
    req.on("error", reject)
    req.on("response", (res) => {
      if (res.statusCode !== 200) reject(new Error(`export answered ${res.statusCode}`))
      let bytes = 0
      // A server that cut the download short (a failed stream) must fail the bench, not end it.
      res.on("error", reject)
      res.on("data", (c: Buffer) => (bytes += c.length))
      res.on("end", () => resolve({ ms: performance.now() - t0, bytes }))
    })
    req.end()
  })
}

/**
 * The same rows as the export (src/results/results.repo.ts resultsPage), in one COPY, on a connection
 * of its own (postgres.js 3.4 leaves a connection that streamed a COPY unusable for the next one: the
 * second round hung), opened before the clock starts.
 */
async function copyRun(dbUrl: string, runId: number): Promise<{ ms: number; bytes: number }> {
  const sql = connectPostgres(dbUrl, 1)
  await sql`select 1`
  const t0 = performance.now()
  // COPY takes no parameters: the run id (an integer of ours) is written into the statement.
  const stream = await sql
    .unsafe(`
    copy (
      select rt.target_id, rt.phone_e164, au.name, rt.status, rt.outcome, rt.attempts,
        coalesce(s.talk_seconds, 0)::int, coalesce(s.cost_minor, 0)::bigint, 'INR', a.status, a.summary, a.goal_met,
        a.sentiment, a.callback_at, a.agreed_value_minor, a.fields ->> 'note'
      from run_targets rt
      left join audience_targets au on au.id = rt.target_id
      left join lateral (
        select sum(c.connected_seconds) as talk_seconds,
          sum(coalesce(c.cost_minor, 0) + coalesce(ca.charged_minor, 0)) as cost_minor
        from calls c left join call_analyses ca on ca.call_id = c.id
        where c.run_target_id = rt.id
      ) s on true
      left join lateral (
        select ca.status, ca.summary, ca.goal_met, ca.sentiment, ca.callback_at, ca.agreed_value_minor, ca.fields
        from calls c join call_analyses ca on ca.call_id = c.id
        where c.run_target_id = rt.id
        order by c.attempt desc
        limit 1
      ) a on true
      where rt.run_id = ${Number(runId)}
      order by rt.target_id
    ) to stdout with (format csv, header)`)
    .readable()
  let bytes = 0
  for await (const chunk of stream as AsyncIterable<Buffer>) bytes += chunk.length
  const ms = performance.now() - t0
  await sql.end({ timeout: 1 })
  return { ms, bytes }
}

export async function benchResults(): Promise<void> {
  await withBenchServer("results", { country: "IN" }, async ({ url, dbUrl, sql, pgVersion, tenantId: t, token }) => {
    step("server up")
    // A finished run: every target called once and analysed, with a 400-character summary and one
    // extracted field. The calls carry no answered_at, so the server's analysis worker leaves them be.
    const [w] = await sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt) values (${t}, 'bench', 'priya', 'bench') returning id`
    const [rb] = await sql<[{ id: number }]>`
      insert into rule_books (tenant_id, workflow_id, version, body, source)
      values (${t}, ${w!.id}, 1, ${sql.json({ analysis: { fields: [{ name: "note", type: "string" }] } })}, 'edited')
      returning id`
    const [run] = await sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, rule_book_id, status) values (${t}, ${w!.id}, ${rb!.id}, 'completed')
      returning id`
    const runId = run!.id
    await sql`
      insert into audience_targets (tenant_id, workflow_id, phone_e164, name)
      select ${t}, ${w!.id}, '+9198' || lpad(i::text, 8, '0'), 'Person ' || i
      from generate_series(1, ${TARGETS}::int) i`
    await sql`
      insert into run_targets (tenant_id, run_id, target_id, phone_e164, status, attempts, outcome)
      select ${t}, ${runId}, id, phone_e164, 'done', 1, 'agreed' from audience_targets where workflow_id = ${w!.id}`
    await sql`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, outcome, connected_seconds, cost_minor, ended_at)
      select ${t}, ${runId}, ${w!.id}, id, target_id, 1, phone_e164, 'sim', 'bench', 'ended', 'agreed', 61, 250, now()
      from run_targets where run_id = ${runId}`
    await sql`
      insert into call_analyses (call_id, tenant_id, run_id, status, summary, goal_met, sentiment, fields, model,
        analyzed_at)
      select id, ${t}, ${runId}, 'done', left('Summary of call ' || id || ': ' || repeat('agreed to renew, ', 30), 400),
        true, 'positive', jsonb_build_object('note', '=' || repeat('x', 99)), 'sim', now()
      from calls where run_id = ${runId}`
    await sql`analyze`
    step(`seeded ${TARGETS} targets`)

    const exportMs: number[] = []
    const copyMs: number[] = []
    let exportBytes = 0
    let copyBytes = 0
    const csvUrl = `${url}/api/runs/${runId}/results?format=csv`
    for (let i = 0; i <= ROUNDS; i++) {
      const e = await download(csvUrl, token)
      const c = await copyRun(dbUrl, runId)
      step(`round ${i}: export ${e.ms.toFixed(0)} ms, COPY ${c.ms.toFixed(0)} ms`)
      if (i === 0) continue // warm-up
      exportMs.push(e.ms)
      copyMs.push(c.ms)
      exportBytes = e.bytes
      copyBytes = c.bytes
    }
    const e = median(exportMs)
    const c = median(copyMs)
    const rate = (ms: number) => Math.round(TARGETS / (ms / 1000))
    const load = loadavg()
      .map((x) => x.toFixed(2))
      .join(" / ")
    const line =
      `results CSV of ${TARGETS} targets: export ${rate(e)} rows/s (${e.toFixed(0)} ms, ` +
      `${(exportBytes / 2 ** 20).toFixed(1)} MiB); COPY TO STDOUT ${rate(c)} rows/s (${c.toFixed(0)} ms, ` +
      `${(copyBytes / 2 ** 20).toFixed(1)} MiB); ratio ${(rate(e) / rate(c)).toFixed(2)}; load ${load}`
    process.stdout.write(`${line}\n`)
    record(
      "results",
      `## results\n\n${machine()}, PostgreSQL ${pgVersion}, one --role all process; load average ` +
        `(1/5/15 min) at the end: ${load}.\n\n` +
        `| measure (a run of ${TARGETS.toLocaleString("en")} targets, each with a call and an analysis) ` +
        `| median of ${ROUNDS} | rows/s | ratio |\n|---|---|---|---|\n` +
        `| \`GET /api/runs/{id}/results?format=csv\`, read as fast as it comes ` +
        `(${(exportBytes / 2 ** 20).toFixed(1)} MiB) | ${e.toFixed(0)} ms | ${rate(e).toLocaleString("en")} ` +
        `| ${(rate(e) / rate(c)).toFixed(2)} |\n` +
        `| bare \`COPY (the same rows) TO STDOUT\` (${(copyBytes / 2 ** 20).toFixed(1)} MiB) | ${c.toFixed(0)} ms ` +
        `| ${rate(c).toLocaleString("en")} | 1.00 |\n\n` +
        `The export reads keyset pages sized by bytes (about 512 KiB of CSV: 100 rows first, then as many as ` +
        `fit, at most 1,000; one short query each, the next read while the last is written), writes each ` +
        `through csv-stringify once the socket took the one before (handed to uWS 64 KiB at a time as the ` +
        `socket drains), and defuses formula cells; COPY formats inside Postgres and sends one stream.\n\n` +
        `ANALYSIS LAG: the analysis queue's lag behind hangups at 200 hangups/s is measured by the analysis ` +
        `worker's bench (not here).`,
    )
  })
}
