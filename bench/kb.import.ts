// bench/kb (import): POST /kb/import's work for 10,000 rules (read and check every row, then one
// transaction that inserts them all) against csv-parse alone on the same file; real Postgres.
import { loadavg } from "node:os"
import { parse } from "csv-parse/sync"
import type { RuleRow } from "../src/kb/kb.repo.js"
import { readCsv, rulesCsv, rulesJson } from "../src/kb/rules.import.js"
import { runImport } from "../src/kb/rules.service.js"
import { redact, type Sql } from "../src/platform/Db.js"
import { migrate } from "../src/platform/Migrator.js"
import { machine, scratchDatabase } from "./lib.js"

const ROWS = 10_000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0
    ? Number.NaN
    : s.length % 2
      ? s[(s.length - 1) / 2]!
      : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

/** Rules as a workspace writes them: quoted text, commas, line breaks, triggers, a few formula cells. */
function sampleRules(): RuleRow[] {
  const at = new Date()
  return Array.from({ length: ROWS }, (_, i) => ({
    id: i + 1,
    tenant_id: 1,
    workflow_id: null,
    bucket: ["objection.price", "objection.timing", "compliance", "opening", "closing"][i % 5]!,
    title: `Rule ${i}: when they say "it's too much"`,
    body:
      `If the callee says the price is too high, acknowledge it, then offer the ${i % 12}-month plan, ` +
      `which costs less per month.\nNever promise a discount you cannot approve; ask a supervisor instead.` +
      (i % 10 === 0 ? "\n=SUM(A1) stays text" : ""),
    trigger: i % 2 === 0 ? { phrases: ["too expensive", "too much", `price ${i}`], category: "price" } : null,
    priority: (i % 200) - 100,
    status: i % 7 === 0 ? "paused" : "active",
    source_kind: "manual",
    learnt_line: null,
    learnt_kind: null,
    created_at: at,
    updated_at: at,
  }))
}

/** The longest the event loop waited for a turn while `work` ran, in ms. */
async function withLoopGap<T>(work: () => Promise<T>): Promise<{ value: T; ms: number; gap: number }> {
  let gap = 0
  let last = performance.now()
  let running = true
  const tick = () => {
    const t = performance.now()
    gap = Math.max(gap, t - last)
    last = t
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  const t0 = performance.now()
  const value = await work()
  const ms = performance.now() - t0
  running = false
  return { value, ms, gap }
}

async function newTenant(sql: Sql): Promise<number> {
  const [t] = await sql<[{ id: number }]>`
    insert into tenants (name, country, currency) values ('bench kb', 'US', 'USD') returning id`
  return t.id
}

/** Runs the import bench and answers its RESULTS.md section (markdown). */
export async function benchKbImport(): Promise<string> {
  const base = process.env.DATABASE_URL
  if (base === undefined || base === "")
    return (
      "## kb import — 10,000 rules vs csv-parse alone\n\n" +
      "Skipped: needs real PostgreSQL (set DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/postgres).\n"
    )
  const loadBefore = loadavg()[0]!
  const scratch = await scratchDatabase(base, "parley_bench_kb")
  const { sql } = scratch
  process.stdout.write(`scratch database ${redact(scratch.url)}; ${ROWS} rules, ${ROUNDS} rounds\n`)
  try {
    await migrate(sql)
    const [server] = await sql<[{ version: string }]>`select split_part(version(), ' ', 2) as version`
    const tenantId = await newTenant(sql)
    const rules = sampleRules()
    const csv = Buffer.from(rulesCsv(rules))
    const json = Buffer.from(rulesJson(rules))
    const times = { parse: [] as number[], read: [] as number[], csv: [] as number[], json: [] as number[] }
    const gaps = { read: [] as number[], csv: [] as number[] }
    const clear = () => sql`delete from kb_rules where tenant_id = ${tenantId}`
    for (let round = 0; round <= ROUNDS; round++) {
      // Round 0 warms the JIT and the database; it is not counted.
      const t0 = performance.now()
      const records = parse(csv, { bom: true, skip_empty_lines: true, relax_column_count: true }) as string[][]
      const parseMs = performance.now() - t0
      if (records.length !== ROWS + 1) throw new Error(`csv-parse read ${records.length} records`)
      const read = await withLoopGap(() => readCsv(csv))
      if (!read.value.ok) throw new Error(`the file did not read back: ${JSON.stringify(read.value.errors[0])}`)
      const full = await withLoopGap(() =>
        runImport(sql, tenantId, { format: "csv", raw: csv }, { mode: "merge", dryRun: false, now: new Date() }),
      )
      if (!full.value.ok || full.value.created !== ROWS) throw new Error(`import failed: ${JSON.stringify(full.value)}`)
      await clear()
      const t1 = performance.now()
      const viaJson = await runImport(
        sql,
        tenantId,
        { format: "json", raw: json },
        { mode: "merge", dryRun: false, now: new Date() },
      )
      const jsonMs = performance.now() - t1
      if (!viaJson.ok || viaJson.created !== ROWS) throw new Error("json import failed")
      const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from kb_rules where tenant_id = ${tenantId}`
      if (n !== ROWS) throw new Error(`expected ${ROWS} rules after the import, found ${n}`)
      await clear()
      if (round === 0) continue
      times.parse.push(parseMs)
      times.read.push(read.ms)
      times.csv.push(full.ms)
      times.json.push(jsonMs)
      gaps.read.push(read.gap)
      gaps.csv.push(full.gap)
      process.stdout.write(
        `round ${round}: csv-parse ${parseMs.toFixed(1)} ms, read+check ${read.ms.toFixed(1)} ms, ` +
          `csv import ${full.ms.toFixed(1)} ms (max loop gap ${full.gap.toFixed(1)} ms), ` +
          `json import ${jsonMs.toFixed(1)} ms\n`,
      )
    }
    const m = {
      parse: median(times.parse),
      read: median(times.read),
      csv: median(times.csv),
      json: median(times.json),
      gapRead: median(gaps.read),
      gapCsv: median(gaps.csv),
    }
    const mb = (csv.length / 2 ** 20).toFixed(1)
    return (
      `## kb import — 10,000 rules through the import vs csv-parse alone\n\n` +
      `Machine: ${machine()}; PostgreSQL ${server.version} on the same machine over TCP loopback. Run ` +
      `${new Date().toISOString().slice(0, 10)}; scratch database, one tenant; the file is the export of ${ROWS} ` +
      `rules (${mb} MiB of CSV: quoted text with commas and line breaks, half with trigger phrases, some formula ` +
      `cells). ${ROUNDS} rounds after a warm-up round, medians; the rules are deleted between imports. 1-minute ` +
      `load average ${loadBefore.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after ` +
      `(the machine is shared).\n\n` +
      `| step | ms | × csv-parse | longest event-loop wait ms |\n` +
      `|---|---:|---:|---:|\n` +
      `| csv-parse/sync alone (baseline: records only) | ${m.parse.toFixed(1)} | 1.00 | ` +
      `${m.parse.toFixed(1)} (blocking) |\n` +
      `| read + check every row (streamed csv-parse, zod, escapes; no database) | ${m.read.toFixed(1)} | ` +
      `${(m.read / m.parse).toFixed(2)} | ${m.gapRead.toFixed(1)} |\n` +
      `| whole CSV import: read, check, one transaction inserting ${ROWS} rules (\`runImport\`) | ` +
      `${m.csv.toFixed(1)} | ${(m.csv / m.parse).toFixed(2)} | ${m.gapCsv.toFixed(1)} |\n` +
      `| whole JSON import of the same rules | ${m.json.toFixed(1)} | ${(m.json / m.parse).toFixed(2)} | – |\n\n` +
      `**A 10,000-rule CSV import takes ${(m.csv / m.parse).toFixed(1)}× csv-parse alone** ` +
      `(${m.csv.toFixed(0)} ms against ${m.parse.toFixed(0)} ms). The file is parsed with csv-parse's stream API ` +
      `fed 64 KiB at a time with a turn of the event loop between chunks, and rows are checked 250 at a time ` +
      `the same way, so other requests wait at most the longest step above rather than the whole parse; the ` +
      `insert is one statement (unnest of ten arrays) in one transaction with the replace's archive and the ` +
      `timeline row (the longest wait of the whole import is postgres.js serialising those arrays).\n`
    )
  } finally {
    await scratch.drop()
  }
}
