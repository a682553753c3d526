// The database's metrics: statements in flight and their durations (every postgres.js client in
// the process), and the pool sizes of the databases the process has open.
import type postgres from "postgres"
import { Gauge } from "prom-client"
import { FastHistogram, registers, ScrapedGauge } from "./metrics.js"

let queriesInFlight = 0

new Gauge({
  name: "parley_db_pool_in_use",
  help: "Statements in flight on this process's database pool (parley_db_pool_size of them run at once)",
  registers,
  collect() {
    this.set(queriesInFlight)
  },
})

const poolSize = new ScrapedGauge(
  "parley_db_pool_size",
  "Connections this process's database pool may open (DB_POOL_MAX; 1 on the embedded database)",
)

const dbQueryDuration = new FastHistogram(
  "parley_db_query_duration_seconds",
  "Time from a statement being handed to the pool until its result (or error) came back",
  [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30],
).child()

interface QueryLike {
  executed: boolean
  resolve: (x: unknown) => unknown
  reject: (x: unknown) => unknown
  handle(): unknown
}
const TIMED = Symbol("parley.timed")
let instrumented = false

/**
 * Instruments a database the process opened (Db.ts calls it once its pool exists): its pool's
 * size is shown until the returned function is called, and every statement of every postgres.js
 * client in this process is timed. postgres.js has no query hooks, so its Query class's handle()
 * (called once, when a query is first awaited) is wrapped to note the start and to wrap the
 * query's settle.
 */
export function instrumentDatabase(sql: postgres.Sql<{ bigint: number }>, max: number): () => void {
  const untrack = poolSize.track(() => max)
  if (instrumented) return untrack
  instrumented = true
  // A tagged query is created lazily: nothing runs until it is awaited, so this one never does.
  const proto = Object.getPrototypeOf(sql`select 1`) as QueryLike
  const handle = proto.handle
  proto.handle = function (this: QueryLike & { [TIMED]?: true }) {
    if (!this.executed && this[TIMED] === undefined) {
      this[TIMED] = true
      const t0 = performance.now()
      queriesInFlight++
      let open = true
      const done = () => {
        if (!open) return
        open = false
        queriesInFlight--
        dbQueryDuration.observe((performance.now() - t0) / 1000)
      }
      const { resolve, reject } = this
      this.resolve = (x) => {
        done()
        return resolve(x)
      }
      this.reject = (x) => {
        done()
        return reject(x)
      }
    }
    return handle.call(this)
  }
  return untrack
}
