// The data-source fetch worker: one subscription to rt.data.fetch in the runtime queue group, so
// each request reaches one process; the source's row claim (pending → fetching) keeps one fetch per source.

import type { Logger } from "pino"
import { objectRows, RowsFormatError } from "../../src/data/rows.parse.js"
import type { SourceRow } from "../../src/data/sources.repo.js"
import { performFetch } from "../../src/data/sources.service.js"
import { fetchUrlRows } from "../../src/data/url.fetch.js"
import type { BusClient, BusSubscription } from "../../src/platform/bus/bus.js"
import type { Config } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"
import { DATA_SOURCE_FETCH, type DataSourceFetch, RUNTIME_QUEUE } from "../../src/platform/subjects.js"
import { storefrontRows } from "../../src/storefront/storefront.rows.js"

export interface DataFetchDeps {
  readonly sql: Sql
  readonly bus: BusClient
  readonly log: Logger
  readonly config: Config
  readonly now: () => Date
}

/** Fetches a source's rows by its kind; any failure becomes a RowsFormatError carrying the reason. */
function loaderFor(deps: DataFetchDeps) {
  return async (source: SourceRow) => {
    if (source.kind === "url") return fetchUrlRows(source.url ?? "", deps.config)
    let customers: Record<string, unknown>[]
    try {
      customers = await storefrontRows(deps.sql, deps.config, source.tenant_id)
    } catch (e) {
      throw new RowsFormatError(e instanceof Error ? e.message : String(e))
    }
    return objectRows(customers)
  }
}

/**
 * Subscribes the worker. The handler does not hold the subscription while a fetch runs (up to
 * 30 s): fetches of different sources proceed side by side; the claim in Postgres decides.
 */
export function startDataFetchWorker(deps: DataFetchDeps): BusSubscription {
  const loadRows = loaderFor(deps)
  return deps.bus.subscribe(
    DATA_SOURCE_FETCH,
    (msg) => {
      const m = msg.json<DataSourceFetch>()
      void performFetch({ sql: deps.sql, now: deps.now, loadRows }, m).then(
        (outcome) => deps.log.info({ source_id: m.source_id, outcome: outcome.kind }, "data source fetch"),
        (err: unknown) => deps.log.error({ err, source_id: m.source_id }, "data source fetch failed"),
      )
    },
    { queue: RUNTIME_QUEUE },
  )
}
