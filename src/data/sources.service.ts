// Data sources: create (a CSV upload, parsed at once; a URL, fetched by the runtime), list, read,
// page rows, delete, and ask for a fetch; and the fetch itself, which a runtime process runs.
import type { Readable } from "node:stream"
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { publishOrWarn } from "../platform/Bus.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import { Conflict, type DomainError, NotFound, ValidationFailed } from "../platform/errors.js"
import { DATA_SOURCE_FETCH, type DataSourceFetch } from "../platform/subjects.js"
import { type ParsedRows, parseCsvRows, RowsFormatError } from "./rows.parse.js"
import type { SourceKind, SourceRow, SourceStatus } from "./sources.repo.js"
import * as repo from "./sources.repo.js"
import { urlRefusal } from "./url.fetch.js"

export const NAME_MAX = 200

export interface SourceView {
  readonly id: number
  readonly name: string
  readonly kind: SourceKind
  readonly status: SourceStatus
  readonly row_count: number
  readonly columns: string[]
  readonly last_fetched_at: string | null
  readonly error: string | null
  readonly url?: string
  readonly created_at: string
}

export const sourceView = (r: SourceRow): SourceView => ({
  id: r.id,
  name: r.name,
  kind: r.kind,
  status: r.status,
  row_count: r.row_count,
  columns: r.columns,
  last_fetched_at: r.last_fetched_at?.toISOString() ?? null,
  error: r.error,
  ...(r.url !== null && { url: r.url }),
  created_at: r.created_at.toISOString(),
})

const notFound = (id: number) => new NotFound({ message: `data source ${id} not found` })

const fieldError = (field: string, message: string) =>
  new ValidationFailed({ message: `${field}: ${message}`, errors: [{ field, message }] })

/** The tenant's source, or 404 (another workspace's too). */
export const findSource = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const row = yield* Effect.promise(() => repo.getSource(sql, tenantId, id))
    if (row === undefined) return yield* Effect.fail(notFound(id))
    return row
  })

export const listSources = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => repo.listSources(sql, tenantId))
    return { sources: rows.map(sourceView) }
  })

export const getSource = (tenantId: number, id: number) =>
  Effect.map(findSource(tenantId, id), (r) => ({ source: sourceView(r) }))

/** Removes the source with its rows and chat. */
export const deleteSource = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const deleted = yield* Effect.promise(() => repo.deleteSource(sql, tenantId, id))
    if (!deleted) return yield* Effect.fail(notFound(id))
    return { deleted: true as const, id }
  })

export const sourceRows = (tenantId: number, id: number, page: { limit: number; offset: number }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* findSource(tenantId, id)
    const { rows, total } = yield* Effect.promise(() => repo.rowsPage(sql, id, page))
    return { rows, total, limit: page.limit, offset: page.offset }
  })

type Parsed =
  | { readonly ok: true; readonly parsed: ParsedRows; readonly name: string }
  | { readonly ok: false; readonly error: DomainError }

/**
 * A csv source from an uploaded file: the whole file is parsed (bounded in rows and columns),
 * then the source is created ready with its rows, in one step; a file that cannot be read is 422.
 */
export const createCsvSource = (
  tenantId: number,
  upload: {
    open: () => Promise<{ stream: Readable; filename: string | undefined } | undefined>
    fields: () => Promise<Readonly<Record<string, string>>>
  },
  run: <A>(work: () => Promise<A>) => Effect.Effect<A, DomainError>,
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const read = yield* run(async (): Promise<Parsed> => {
      const file = await upload.open()
      if (file === undefined)
        return { ok: false, error: fieldError("file", "the form has no file part: send the CSV as a file") }
      let parsed: ParsedRows
      try {
        parsed = await parseCsvRows(file.stream)
      } catch (e) {
        if (e instanceof RowsFormatError) {
          file.stream.resume()
          return { ok: false, error: fieldError("file", e.message) }
        }
        throw e
      }
      const fields = await upload.fields()
      const name = (fields.name ?? "").trim() || file.filename?.trim() || "Uploaded CSV"
      return { ok: true, parsed, name }
    })
    if (!read.ok) return yield* Effect.fail(read.error)
    if (read.name.length > NAME_MAX)
      return yield* Effect.fail(fieldError("name", `must be at most ${NAME_MAX} characters`))
    const source = yield* Effect.promise(() =>
      repo.createSource(sql, { tenantId, name: read.name, kind: "csv", url: null, status: "pending" }),
    )
    yield* Effect.promise(() =>
      repo.replaceRows(sql, {
        tenantId,
        sourceId: source.id,
        rows: read.parsed.rows,
        columns: read.parsed.columns,
        now: clock.now(),
      }),
    )
    const row = yield* Effect.promise(() => repo.getSource(sql, tenantId, source.id))
    return { source: sourceView(row!) }
  })

/** Publishes a fetch for the runtime; a lost message leaves the source pending until fetched again. */
const announceFetch = (tenantId: number, sourceId: number) =>
  Effect.gen(function* () {
    const message: DataSourceFetch = { source_id: sourceId, tenant_id: tenantId }
    yield* publishOrWarn(DATA_SOURCE_FETCH, message, "could not publish a data source fetch", { source_id: sourceId })
  })

/** A url source: the URL checked (https, public host), the source created pending, a fetch published. */
export const createUrlSource = (tenantId: number, input: { name: string; url: string }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const refused = yield* Effect.promise(() => urlRefusal(input.url, config))
    if (refused !== undefined) return yield* Effect.fail(fieldError("url", refused))
    const source = yield* Effect.promise(() =>
      repo.createSource(sql, { tenantId, name: input.name, kind: "url", url: input.url, status: "pending" }),
    )
    yield* announceFetch(tenantId, source.id)
    return { source: sourceView(source) }
  })

/**
 * Asks the source's agent to fetch new data: the source becomes pending and a runtime process
 * fetches it. A fetch already running is left to finish (the answer says `fetching`). A csv
 * source has nothing to fetch from: 409.
 */
export const requestFetch = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const current = yield* findSource(tenantId, id)
    if (current.kind === "csv")
      return yield* Effect.fail(
        new Conflict({
          code: "CONFLICT",
          message: "a csv source has nothing to fetch: upload the file again as a new source",
        }),
      )
    const row = yield* Effect.promise(() => repo.requestFetch(sql, tenantId, id, clock.now()))
    if (row === undefined) return yield* Effect.fail(notFound(id))
    if (row.status === "pending") yield* announceFetch(tenantId, id)
    return { source: sourceView(row) }
  })

// ---------------------------------------------------------------------------------------------
// The fetch, run by a runtime process (runtime/workers/data-fetch.ts)

export interface FetchDeps {
  readonly sql: Sql
  readonly now: () => Date
  /** The rows of a url or storefront source, or a RowsFormatError saying why not. */
  readonly loadRows: (source: SourceRow) => Promise<ParsedRows>
}

export type FetchOutcome =
  | { readonly kind: "skipped" }
  | { readonly kind: "ready"; readonly count: number; readonly added: number; readonly removed: number }
  | { readonly kind: "failed"; readonly error: string }

const reasonOf = (e: unknown): string =>
  e instanceof RowsFormatError ? e.message : `the fetch failed: ${e instanceof Error ? e.message : String(e)}`

/**
 * Claims the source (pending → fetching, so one fetch runs at a time), loads and parses its rows,
 * replaces them and tells the chat what changed; on failure the old rows stay, the source is
 * failed with the reason, and the chat says so.
 */
export async function performFetch(deps: FetchDeps, msg: DataSourceFetch): Promise<FetchOutcome> {
  const { sql } = deps
  const source = await repo.claimFetch(sql, msg.tenant_id, msg.source_id, deps.now())
  if (source === undefined || source.kind === "csv") return { kind: "skipped" }
  let parsed: ParsedRows
  try {
    parsed = await deps.loadRows(source)
  } catch (e) {
    const error = reasonOf(e).slice(0, 1000)
    await repo.markFailed(sql, msg.tenant_id, source.id, error, deps.now())
    await repo.appendMessage(sql, {
      tenantId: msg.tenant_id,
      sourceId: source.id,
      role: "system",
      text: `Fetch failed: ${error}. The previous ${source.row_count} rows are kept.`,
      data: { event: "fetch_failed", error, row_count: source.row_count },
    })
    return { kind: "failed", error }
  }
  const done = await repo.replaceRows(sql, {
    tenantId: msg.tenant_id,
    sourceId: source.id,
    rows: parsed.rows,
    columns: parsed.columns,
    now: deps.now(),
  })
  if (done === undefined) return { kind: "skipped" }
  await repo.appendMessage(sql, {
    tenantId: msg.tenant_id,
    sourceId: source.id,
    role: "system",
    text: `Fetched ${done.count} rows (+${done.added} −${done.removed}).`,
    data: { event: "fetched", row_count: done.count, added: done.added, removed: done.removed },
  })
  return { kind: "ready", ...done }
}
