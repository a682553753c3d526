// Call endings from a runtime process, grouped: whatever ended while the previous group was being
// written goes together in the next one — the money (src/billing: settleCalls, one transaction per
// group, each reservation settled once) and the attempt's end (src/calls: finishAttempts, one
// transaction per group). One at a time, a burst of endings (a busy minute, or a shutdown ending
// thousands of calls) took a pool connection and several round trips per call.
import { type AttemptEnd, finishAttempts } from "../../src/calls/calls.repo.js"
import { BatchWriter } from "../../src/platform/batch-writer.js"
import { retryOnDisconnect, type Sql } from "../../src/platform/Db.js"
import { perDatabase } from "../../src/platform/per-database.js"

/** One process's attempt endings per database (runtime/actors/call-effects.ts, runtime/actors/shutdown.ts). */
const endingsOf = perDatabase(
  (sql: Sql) =>
    new BatchWriter<"end", AttemptEnd, boolean>((_, items) => retryOnDisconnect(() => finishAttempts(sql, items)), {
      maxBatch: 1_000,
      splitRefused: true,
    }),
)

/**
 * Records the end of an attempt with the others ending now (calls.finishAttempts); true when this
 * call ended it. Postgres out of reach is waited out (the end is idempotent).
 */
export function finishAttemptGrouped(sql: Sql, end: AttemptEnd): Promise<boolean> {
  return endingsOf(sql).submit("end", end)
}
