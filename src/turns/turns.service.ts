// Turn streams for watchers (history, then live, with no gap and no duplicate), the calls in
// flight, and turns ingested from external orchestrators onto the same bus and table.
import { Effect } from "effect"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { NotFound } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { turnSubject } from "../platform/subjects.js"
import { TurnStreams } from "./TurnStreams.js"
import type { TurnMessage } from "./turn.message.js"
import type { StreamSink } from "./turn-hub.js"
import * as repo from "./turns.repo.js"

const HISTORY_PAGE = 500
export const LIVE_CALLS_MAX = 20

const runNotFound = (runId: number) => new NotFound({ message: `run ${runId} not found` })

/**
 * Checks the run is the caller's and hands back the function that serves one watcher: join the
 * run's subscription, send the history after `sinceSeq` page by page, then go live until the
 * client leaves (or is dropped, or idles out).
 */
export const openTurnStream = (
  tenantId: number,
  runId: number,
  opts: { sinceSeq: number; targetId: number | undefined },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const hub = yield* TurnStreams
    const run = yield* Effect.promise(() => repo.findRunOfTenant(sql, tenantId, runId))
    if (run === undefined) return yield* Effect.fail(runNotFound(runId))
    return async (sink: StreamSink & { onClose(cb: () => void): void }): Promise<void> => {
      const client = await hub.join(tenantId, runId, opts.targetId, opts.sinceSeq, sink)
      const closed = new Promise<void>((resolve) => sink.onClose(resolve))
      void closed.then(() => hub.leave(client))
      // Tells EventSource how soon to reconnect, before anything else.
      if (!(await sink.write("retry: 2000\n\n"))) return
      let cursor = opts.sinceSeq
      for (;;) {
        const page = await repo.turnsAfter(sql, runId, cursor, opts.targetId, HISTORY_PAGE)
        if (page.length > 0 && !(await hub.writeHistory(client, page))) return
        if (page.length < HISTORY_PAGE) break
        cursor = page[page.length - 1]!.seq
      }
      hub.goLive(client)
      await closed
    }
  })

export const listLiveCalls = (tenantId: number, runId: number | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => repo.liveCalls(sql, tenantId, runId, LIVE_CALLS_MAX))
    return rows.map((r) => ({
      ...r,
      started_at: r.started_at.toISOString(),
      answered_at: r.answered_at?.toISOString() ?? null,
      stream_url: `/api/runs/${r.run_id}/turns/stream?target_id=${r.target_id}`,
    }))
  })

export interface TurnInput {
  readonly run_id: number
  readonly target_id: number
  readonly call_id?: number | undefined
  /** The caller's own per-call index; with outcome_id it is the idempotency key. */
  readonly seq: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly outcome_id?: string | undefined
  readonly at?: string | undefined
}

/** Per run, this process publishes ingested turns in the order their seqs were handed out. */
const publishing = new Map<number, Promise<void>>()

export const ingestTurn = (tenantId: number, t: TurnInput) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const bus = yield* Bus
    const log = yield* Log
    const run = yield* Effect.promise(() => repo.findRunOfTenant(sql, tenantId, t.run_id))
    if (run === undefined) return yield* Effect.fail(runNotFound(t.run_id))
    const stored = yield* Effect.promise(() => {
      const prior = publishing.get(t.run_id) ?? Promise.resolve()
      const next = prior.then(async () => {
        const r = await repo.storeIngestedTurn(sql, {
          tenantId,
          runId: t.run_id,
          targetId: t.target_id,
          callId: t.call_id ?? null,
          turnIndex: t.seq,
          speaker: t.speaker,
          text: t.text,
          outcomeId: t.outcome_id ?? null,
          at: t.at === undefined ? new Date() : new Date(t.at),
        })
        if (r.created) {
          try {
            bus.publish(turnSubject(tenantId, t.run_id, t.target_id), r.turn satisfies TurnMessage)
          } catch (err) {
            log.warn({ err, run_id: t.run_id }, "could not publish an ingested turn")
          }
        }
        return r
      })
      const tail = next.then(
        () => undefined,
        () => undefined,
      )
      publishing.set(t.run_id, tail)
      void tail.then(() => {
        if (publishing.get(t.run_id) === tail) publishing.delete(t.run_id)
      })
      return next
    })
    return stored
  })
