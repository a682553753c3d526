// The list endpoints a dashboard polls answer through here: readers of the same key that wait
// together share one run of the handler's read and one serialisation (src/platform/read-cache.ts).
import { Effect, Runtime } from "effect"
import { Db } from "../src/platform/Db.js"
import { sharedReadsOf } from "../src/platform/read-cache.js"
import { bytes, type Reply } from "./reply.js"

const JSON_TYPE = "application/json; charset=utf-8"

/**
 * `read`'s value as a 200 JSON reply, from a run of `read` that started after this request
 * arrived, shared with every request of the same `key` waiting for it. `key` must name everything
 * the body depends on (the workspace and each query parameter); a failure is shared alike.
 * `freshFor`: for a `cached` route whose answer shows a deadline, how long it stays true (ms).
 */
export const sharedJson = <T, E, R>(
  key: string,
  read: Effect.Effect<T, E, R>,
  freshFor?: (value: T) => number | undefined,
): Effect.Effect<Reply, E, R | Db> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const runtime = yield* Effect.runtime<R>()
    const serialised = Effect.map(read, (body) => ({ text: JSON.stringify(body), freshForMs: freshFor?.(body) }))
    // The shared run is not the request's fiber: a client going away does not cut it short for the others.
    const exit = yield* Effect.promise(() =>
      sharedReadsOf(sql).read(key, () => Runtime.runPromiseExit(runtime)(serialised)),
    )
    const { text, freshForMs } = yield* exit
    const reply = bytes(JSON_TYPE, text)
    return freshForMs === undefined ? reply : { ...reply, freshForMs }
  })

/** Milliseconds from now to the earliest of `instants` still ahead (ISO 8601 strings), if any. */
export function untilEarliest(instants: Iterable<unknown>): number | undefined {
  const now = Date.now()
  let earliest = Infinity
  for (const at of instants) {
    if (typeof at !== "string") continue
    const t = Date.parse(at)
    if (t > now && t < earliest) earliest = t
  }
  return earliest === Infinity ? undefined : earliest - now
}
