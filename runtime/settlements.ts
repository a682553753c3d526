// Call endings from a runtime process, grouped: whatever ended while the previous group was being
// written goes together in the next one — the money (src/billing: settleCalls, one transaction per
// group, each reservation settled once) and the attempt's end (src/calls: finishAttempts, one
// transaction per group). One at a time, a burst of endings (a busy minute, or a shutdown ending
// thousands of calls) took a pool connection and several round trips per call.
import { type AttemptEnd, finishAttempts } from "../src/calls/calls.repo.js"
import { isConnectionError, retryOnDisconnect, type Sql } from "../src/platform/Db.js"

interface Waiting<I, O> {
  readonly item: I
  readonly resolve: (o: O) => void
  readonly reject: (e: unknown) => void
}

/** Most items one group writes; more wait for the next. */
const MAX_GROUP = 1_000

/**
 * Groups the items submitted while a group is in flight into the next one (one group in flight at
 * a time). A group that fails for another reason than Postgres being out of reach is written again
 * one item at a time, so one bad item fails only its own caller (Postgres still out of reach after
 * the group's own retries fails the whole group: one at a time would only wait longer).
 */
export class Grouper<I, O> {
  private waiting: Array<Waiting<I, O>> = []
  private busy = false

  constructor(
    private readonly writeGroup: (items: readonly I[]) => Promise<readonly O[]>,
    private readonly maxGroup = MAX_GROUP,
  ) {}

  submit(item: I): Promise<O> {
    const p = new Promise<O>((resolve, reject) => this.waiting.push({ item, resolve, reject }))
    // The first of a burst waits a microtask turn for the rest of it.
    if (!this.busy) {
      this.busy = true
      queueMicrotask(() => void this.drain())
    }
    return p
  }

  private async drain(): Promise<void> {
    try {
      while (this.waiting.length > 0) {
        const group = this.waiting.splice(0, this.maxGroup)
        try {
          const out = await this.writeGroup(group.map((w) => w.item))
          for (const [i, w] of group.entries()) w.resolve(out[i] as O)
        } catch (err) {
          if (group.length === 1 || isConnectionError(err)) for (const w of group) w.reject(err)
          else
            for (const w of group)
              await this.writeGroup([w.item]).then(
                (o) => w.resolve(o[0] as O),
                (e: unknown) => w.reject(e),
              )
        }
      }
    } finally {
      this.busy = false
    }
  }
}

/** One process's attempt endings per database (runtime/call-effects.ts, runtime/shutdown.ts). */
const endings = new WeakMap<Sql, Grouper<AttemptEnd, boolean>>()

/**
 * Records the end of an attempt with the others ending now (calls.finishAttempts); true when this
 * call ended it. Postgres out of reach is waited out (the end is idempotent).
 */
export function finishAttemptGrouped(sql: Sql, end: AttemptEnd): Promise<boolean> {
  let g = endings.get(sql)
  if (g === undefined) {
    g = new Grouper((items) => retryOnDisconnect(() => finishAttempts(sql, items)))
    endings.set(sql, g)
  }
  return g.submit(end)
}
