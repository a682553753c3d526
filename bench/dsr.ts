// bench/dsr: POST /dsr/export of a contact with 10,000 turns (over 50 calls, among 90,000 turns of
// other contacts in the same workspace) through a real api process on real PostgreSQL, against a
// bare SELECT of the same turns; the spec's bound is 30 s. The erase half of the bench is
// the erase's owner's (not measured here).
import { machine, record, withBenchServer } from "./lib.js"

const TURNS = Number(process.env.BENCH_DSR_TURNS ?? 10_000)
const CALLS = 50
const OTHER_TARGETS = Number(process.env.BENCH_DSR_OTHERS ?? 900)
const OTHER_TURNS_EACH = 100
const ROUNDS = 5
const PHONE = "+14155550123"

const START = performance.now()
const step = (what: string) => process.stdout.write(`  ${((performance.now() - START) / 1000).toFixed(1)} s: ${what}\n`)
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

async function call(base: string, path: string, body: unknown, bearer?: string) {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...(bearer !== undefined && { authorization: `Bearer ${bearer}` }) },
    body: JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, text }
}

export async function benchDsr(): Promise<void> {
  await withBenchServer("dsr", { country: "US" }, async ({ url, sql, pgVersion, tenantId: t, token }) => {
    step("server up")
    // The contact: one target, one run, CALLS calls, TURNS turns; others: OTHER_TARGETS × OTHER_TURNS_EACH turns.
    const [w] = await sql<[{ id: number }]>`
      insert into workflows (tenant_id, name, persona, nl_prompt) values (${t}, 'bench', 'priya', 'bench') returning id`
    const [run] = await sql<
      [{ id: number }]
    >`insert into runs (tenant_id, workflow_id) values (${t}, ${w!.id}) returning id`
    await sql`
      insert into audience_targets (tenant_id, workflow_id, phone_e164, name)
      select ${t}, ${w!.id}, case when i = 0 then ${PHONE} else '+1415556' || lpad(i::text, 4, '0') end, 'n' || i
      from generate_series(0, ${OTHER_TARGETS}::int) i`
    await sql`
      insert into run_targets (tenant_id, run_id, target_id, phone_e164, status)
      select ${t}, ${run!.id}, id, phone_e164, 'done' from audience_targets where tenant_id = ${t}`
    await sql`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status)
      select ${t}, ${run!.id}, ${w!.id}, rt.id, rt.target_id, a, rt.phone_e164, 'sim', 'bench', 'ended'
      from run_targets rt, generate_series(1, ${CALLS}::int) a
      where rt.run_id = ${run!.id} and (rt.phone_e164 = ${PHONE} or a = 1)`
    await sql`
      insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
      select ${t}, ${run!.id}, c.target_id, c.id, row_number() over (), g,
             case when g % 2 = 0 then 'agent' else 'callee' end,
             'A line of the conversation, about as long as people speak it, number ' || g, now()
      from calls c
      cross join lateral generate_series(0, case when c.phone_e164 = ${PHONE} then ${TURNS / CALLS - 1}::int
                                                 else ${OTHER_TURNS_EACH - 1}::int end) g
      where c.run_id = ${run!.id}`
    step("seeded")
    await sql`analyze`
    const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from turns where tenant_id = ${t}`
    const [target] = await sql<[{ id: number }]>`
      select id from audience_targets where tenant_id = ${t} and phone_e164 = ${PHONE}`

    const exportMs: number[] = []
    const selectMs: number[] = []
    let bytes = 0
    let turnsOut = 0
    for (let i = 0; i <= ROUNDS; i++) {
      const t0 = performance.now()
      const res = await call(url, "/dsr/export", { contact_identifier: "(415) 555-0123" }, token)
      const t1 = performance.now()
      if (res.status !== 200) throw new Error(`export ${res.status} ${res.text.slice(0, 300)}`)
      const s0 = performance.now()
      const rows = await sql`select * from turns where tenant_id = ${t} and target_id = ${target!.id} order by seq`
      const s1 = performance.now()
      step(`export ${i}: ${(t1 - t0).toFixed(0)} ms`)
      if (i === 0) continue // warm-up
      exportMs.push(t1 - t0)
      selectMs.push(s1 - s0)
      bytes = res.text.length
      turnsOut = (JSON.parse(res.text) as { bundle: { turns: unknown[] } }).bundle.turns.length
      if (rows.length !== turnsOut) throw new Error(`export has ${turnsOut} turns, the select ${rows.length}`)
    }
    const e = median(exportMs)
    const s = median(selectMs)
    const line =
      `export of a contact with ${turnsOut} turns (${n} turns in the workspace): median ${e.toFixed(0)} ms ` +
      `over ${ROUNDS} (${(bytes / 2 ** 20).toFixed(1)} MiB JSON); bare SELECT of the same turns ${s.toFixed(1)} ms; ` +
      `ratio ${(e / s).toFixed(1)}×; bound 30 s`
    process.stdout.write(`${line}\n`)
    record(
      "dsr",
      `## dsr\n\n${machine()}, PostgreSQL ${pgVersion}, one --role all process.\n\n` +
        `| measure | median of ${ROUNDS} |\n|---|---|\n` +
        `| POST /dsr/export, ${turnsOut} turns over ${CALLS} calls (${n} turns in the workspace) ` +
        `| ${e.toFixed(0)} ms |\n` +
        `| bare \`SELECT\` of the same turns | ${s.toFixed(1)} ms |\n| ratio | ${(e / s).toFixed(1)}× |\n\n` +
        `The export also reads every other registered table, the timeline and the text of the workspace's turns ` +
        `(a turn naming the contact belongs to the export), then serialises ${(bytes / 2 ** 20).toFixed(1)} MiB.`,
    )
  })
}
