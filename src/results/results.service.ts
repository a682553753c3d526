// What a run's calls came to, for the workspace that ran them: one call in full (GET /api/calls/{id}) and
// a run's results per target as JSON pages or one streamed CSV file (a few at once per workspace).
import { Effect } from "effect"
import { Db, type Sql } from "../platform/Db.js"
import { NotFound, RateLimited } from "../platform/errors.js"
import { encodeListCursor } from "../platform/page.cursor.js"
import { perDatabase } from "../platform/per-database.js"
import { iso } from "../platform/time.js"
import { CALL_TURNS_MAX, callView } from "./call-view.js"
import { type ChunkWriter, type PagePlan, writeResultsCsv } from "./results.csv.js"
import * as repo from "./results.repo.js"

/**
 * How a CSV export reads: pages of about 512 KiB of CSV (one in the socket, one read ahead), from 100
 * rows at first up to 1,000, so a run with long summaries and twenty fields reads fewer rows at a time
 * rather than pages of several MB.
 */
export const CSV_PAGES: PagePlan = { firstRows: 100, maxRows: 1_000, pageBytes: 512 * 1024 }

/**
 * CSV exports a workspace may have streaming at once from one api process (each holds a page or two
 * and keeps the database busy for as long as its client reads); another is 429 RATE_LIMITED with
 * Retry-After. Per process, like the memory it protects.
 */
export const CSV_EXPORTS_PER_WORKSPACE = 2
const CSV_RETRY_AFTER_S = 5
/** A slot whose file is never written (a HEAD request, a client gone before the first byte) comes back after this. */
const UNUSED_SLOT_MS = 10_000
/** Exports streaming per workspace, per database (workspace ids are the database's). */
const exportsOf = perDatabase(() => new Map<number, number>())

/** A slot for one of the workspace's CSV exports, and how to give it back (once); undefined: none free. */
function takeExportSlot(sql: Sql, tenantId: number): (() => void) | undefined {
  const exportsRunning = exportsOf(sql)
  const n = exportsRunning.get(tenantId) ?? 0
  if (n >= CSV_EXPORTS_PER_WORKSPACE) return undefined
  exportsRunning.set(tenantId, n + 1)
  let held = true
  return () => {
    if (!held) return
    held = false
    const left = (exportsRunning.get(tenantId) ?? 1) - 1
    if (left <= 0) exportsRunning.delete(tenantId)
    else exportsRunning.set(tenantId, left)
  }
}

/** An extracted field as a results column: its name and type, from the run's rule book. */
export interface ResultField {
  readonly name: string
  readonly type: string
}

/**
 * The rule book's `analysis.fields`, as far as the results need them. The rule book was validated
 * when it was saved (at most 20 fields, unique names); an older one without the section has none.
 */
export function fieldsOf(raw: unknown): ResultField[] {
  if (!Array.isArray(raw)) return []
  const seen = new Set<string>()
  const out: ResultField[] = []
  for (const f of raw as unknown[]) {
    const name = (f as { name?: unknown } | null)?.name
    const type = (f as { type?: unknown } | null)?.type
    if (typeof name !== "string" || name === "" || seen.has(name)) continue
    seen.add(name)
    out.push({ name, type: typeof type === "string" ? type : "string" })
  }
  return out.slice(0, 20)
}

const callNotFound = (id: number) => new NotFound({ message: `call ${id} not found` })
const runNotFound = (id: number) => new NotFound({ message: `run ${id} not found` })

export const getCall = (tenantId: number, callId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const call = yield* Effect.promise(() => repo.callOfTenant(sql, tenantId, callId))
    if (call === undefined) return yield* Effect.fail(callNotFound(callId))
    const [turns, analysis] = yield* Effect.promise(() =>
      Promise.all([
        // One more than is shown says whether the transcript was cut.
        repo.turnsOfCall(sql, tenantId, callId, CALL_TURNS_MAX + 1),
        repo.analysisOfCall(sql, tenantId, callId),
      ]),
    )
    return callView(call, turns, analysis)
  })

const runOf = (tenantId: number, runId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const run = yield* Effect.promise(() => repo.runOfTenant(sql, tenantId, runId))
    if (run === undefined) return yield* Effect.fail(runNotFound(runId))
    return { sql, run, fields: fieldsOf(run.analysis_fields) }
  })

const resultView = (r: repo.ResultRow, fields: ReadonlyArray<ResultField>) => ({
  target_id: r.target_id,
  phone: r.phone,
  name: r.name,
  status: r.status,
  outcome: r.outcome,
  attempts: r.attempts,
  talk_seconds: r.talk_seconds,
  cost_minor: r.cost_minor,
  analysis_status: r.analysis_status,
  summary: r.summary,
  goal_met: r.goal_met,
  sentiment: r.sentiment,
  callback_at: iso(r.callback_at),
  agreed_value_minor: r.agreed_value_minor,
  decision_effect: r.decision_effect,
  call_id: r.call_id === null ? null : Number(r.call_id),
  arm: r.arm,
  // Every field the rule book asks for, null where the call did not reveal it (or has no analysis).
  fields: Object.fromEntries(fields.map((f) => [f.name, r.fields?.[f.name] ?? null])),
})

/** One JSON page of a run's results, in target order; `after` is the cursor's target id. */
export const resultsPage = (tenantId: number, runId: number, page: { limit: number; after: number | undefined }) =>
  Effect.gen(function* () {
    const { sql, run, fields } = yield* runOf(tenantId, runId)
    const rows = yield* Effect.promise(() => repo.resultsPage(sql, tenantId, runId, page.after ?? 0, page.limit + 1))
    const shown = rows.slice(0, page.limit)
    const last = shown[shown.length - 1]
    return {
      run_id: run.id,
      workflow_id: run.workflow_id,
      run_status: run.status,
      currency: run.currency,
      fields,
      results: shown.map((r) => resultView(r, fields)),
      next_cursor: rows.length > page.limit && last !== undefined ? encodeListCursor(last.target_id) : null,
    }
  })

/**
 * Checks the run is the caller's (so a 404 comes before any header is sent) and that the workspace
 * has an export slot free (else a 429, also before any header), and hands back the writer of its CSV
 * file. Each page is its own short query, not a cursor (postgres.js `.cursor`): a cursor is one
 * statement for the whole file, so a client reading slower than DB_STATEMENT_TIMEOUT_MS allows cuts
 * it off (tried: statement_timeout 1 s, a reader taking 400 ms a batch, cancelled after 30 rows).
 * Keyset pages on (run_id, target_id) cost one index range each.
 */
export const resultsCsv = (tenantId: number, runId: number) =>
  Effect.gen(function* () {
    const { sql, run, fields } = yield* runOf(tenantId, runId)
    const names = fields.map((f) => f.name)
    const release = takeExportSlot(sql, tenantId)
    if (release === undefined)
      return yield* Effect.fail(
        new RateLimited({
          message: `at most ${CSV_EXPORTS_PER_WORKSPACE} CSV exports of a workspace at once; try again shortly`,
          retryAfterSeconds: CSV_RETRY_AFTER_S,
        }),
      )
    const unused = setTimeout(release, UNUSED_SLOT_MS)
    unused.unref()
    return {
      filename: `run-${run.id}-results.csv`,
      write: async (out: ChunkWriter) => {
        clearTimeout(unused)
        try {
          await writeResultsCsv(out, { fields: names, currency: run.currency, pages: CSV_PAGES }, (after, limit) =>
            repo.resultsPage(sql, tenantId, runId, after, limit),
          )
        } finally {
          release()
        }
      },
    }
  })
