// Turn streams for watchers (history, then live, with no gap and no duplicate), the calls in
// flight, and turns ingested from external orchestrators onto the same bus and table.
import { Effect } from "effect"
import { Db } from "../platform/Db.js"
import { NotFound, ValidationFailed } from "../platform/errors.js"
import type { StreamSink } from "../platform/live-hub.js"
import { perDatabase } from "../platform/per-database.js"
import { TurnStreams } from "./TurnStreams.js"
import { TurnWriters } from "./turn-writer.js"
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
    return rows.map(({ on_hold_approval_id, on_hold_until, ...r }) => ({
      ...r,
      started_at: r.started_at.toISOString(),
      answered_at: r.answered_at?.toISOString() ?? null,
      stream_url: `/api/runs/${r.run_id}/turns/stream?target_id=${r.target_id}`,
      // The callee waits for a human: decide it (POST /api/approvals/{approval_id}/decide) before hold_until.
      on_hold:
        on_hold_approval_id === null
          ? null
          : {
              approval_id: on_hold_approval_id,
              hold_until: on_hold_until === null ? null : new Date(on_hold_until).toISOString(),
            },
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

/** Runs known to be the tenant's (a run never changes workspace), so a busy run is looked up once. */
const knownRunsOf = perDatabase(() => new Map<string, number>())
const KNOWN_RUN_MS = 60_000
const KNOWN_RUNS_MAX = 10_000

/**
 * Stores turns from an external orchestrator (one, or a batch of up to 500 in order) through the
 * process's turn writer: the runs must be the caller's, and a call_id one of the run's calls.
 * Answers each turn in input order, `created` false for one already stored under its key.
 */
export const ingestTurns = (tenantId: number, turns: readonly TurnInput[], fieldOf: (i: number) => string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const now = Date.now()
    const knownRuns = knownRunsOf(sql)
    for (const runId of new Set(turns.map((t) => t.run_id))) {
      const key = `${tenantId}.${runId}`
      if ((knownRuns.get(key) ?? 0) > now) continue
      const run = yield* Effect.promise(() => repo.findRunOfTenant(sql, tenantId, runId))
      if (run === undefined) return yield* Effect.fail(runNotFound(runId))
      if (knownRuns.size >= KNOWN_RUNS_MAX) knownRuns.clear()
      knownRuns.set(key, now + KNOWN_RUN_MS)
    }
    const byRun = new Map<number, Set<number>>()
    for (const t of turns)
      if (t.call_id !== undefined) {
        let ids = byRun.get(t.run_id)
        if (ids === undefined) byRun.set(t.run_id, (ids = new Set()))
        ids.add(t.call_id)
      }
    for (const [runId, ids] of byRun) {
      const found = new Set(yield* Effect.promise(() => repo.callsOfRun(sql, tenantId, runId, [...ids])))
      const i = turns.findIndex((t) => t.run_id === runId && t.call_id !== undefined && !found.has(t.call_id))
      if (i >= 0)
        return yield* Effect.fail(
          new ValidationFailed({
            message: `call ${turns[i]!.call_id} is not a call of run ${runId}`,
            errors: [{ field: fieldOf(i), message: "must be a call of the run" }],
          }),
        )
    }
    const writer = yield* TurnWriters
    return yield* Effect.promise(() =>
      writer.write(
        turns.map((t) => ({
          tenantId,
          runId: t.run_id,
          targetId: t.target_id,
          callId: t.call_id ?? null,
          turnIndex: t.seq,
          speaker: t.speaker,
          text: t.text,
          outcomeId: t.outcome_id ?? null,
          at: t.at === undefined ? new Date(now) : new Date(t.at),
        })),
      ),
    )
  })
