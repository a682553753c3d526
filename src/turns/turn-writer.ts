// Every turn a process stores goes through its one TurnWriter: the runtime's own turns and those
// POST /internal/turns ingests. Per run, one write is in flight at a time; whatever arrives while it
// is (up to MAX_BATCH) goes in the next, as one statement that takes the batch's seqs from the run's
// seq row and inserts the turns (group commit). After the commit the new turns are published on the
// bus in seq order, so a watcher that subscribes and then reads history misses none.
//
// Two writers on one run (two processes): the seq row stays locked until the statement commits, so
// seqs follow commit order across writers: when a turn with seq n is visible, every turn with a
// lower seq that will ever exist is visible too. Each writer publishes its own turns in seq order;
// the bus does not order two publishers against each other, so a watcher's hub fills a hole in the
// seqs it receives from Postgres (src/turns/turn-hub.ts) before it sends what follows.
import { Context, Effect, Layer } from "effect"
import type { Logger } from "pino"
import { Bus } from "../platform/Bus.js"
import { BatchWriter } from "../platform/batch-writer.js"
import type { BusClient } from "../platform/bus/bus.js"
import { Db, type Sql } from "../platform/Db.js"
import { Log } from "../platform/Log.js"
import { turnSubject } from "../platform/subjects.js"
import type { TurnMessage } from "./turn.message.js"
import { existingTurns, storeTurnBatch, type TurnToStore } from "./turns.repo.js"

/** Most turns one statement carries; more wait for the next. */
export const MAX_BATCH = 1000

export interface StoredTurn {
  readonly turn: TurnMessage
  /** False: a turn with the same key was already stored, and `turn` is that one (not published again). */
  readonly created: boolean
}

interface Pending {
  readonly item: TurnToStore
  /** The runtime's turns are kept and written again while Postgres is away; an ingested one fails its request. */
  readonly keep: boolean
}

/** Postgres text cannot hold NUL. */
const clean = (text: string): string => (text.includes("\u0000") ? text.replaceAll("\u0000", "") : text)

const dedupeKey = (t: TurnToStore): string | undefined =>
  t.outcomeId !== null
    ? `o${t.tenantId}|${t.turnIndex}|${t.outcomeId}`
    : t.callId !== null
      ? `c${t.callId}|${t.turnIndex}`
      : undefined

class TurnNotStored extends Error {
  constructor() {
    super("turn was neither stored nor found")
  }
}

export class TurnWriter {
  private readonly batches: BatchWriter<number, Pending, StoredTurn | TurnNotStored>

  constructor(
    private readonly sql: Sql,
    private readonly bus: BusClient,
    private readonly log: Logger,
  ) {
    this.batches = new BatchWriter((runId, batch) => this.store(runId, batch), {
      maxBatch: MAX_BATCH,
      // Whatever else arrives in this event-loop turn shares the first statement.
      start: "immediate",
      splitRefused: true,
      keep: (p) => p.keep,
      onFailure: (err, { key, items, kept, failures }) => {
        if (kept > 0) {
          if (failures === 1 || failures % 50 === 0)
            this.log.error({ err, run_id: key, turns: kept }, "could not store turns; retrying")
        } else if (items > 1) this.log.warn({ err, run_id: key, turns: items }, "a batch of turns was refused")
        else this.log.error({ err, run_id: key }, "could not store a turn")
      },
    })
  }

  /** Stores (then publishes) turns of one or more runs; resolves per turn once it is stored. */
  write(items: readonly TurnToStore[], opts: { keep?: boolean } = {}): Promise<StoredTurn[]> {
    const keep = opts.keep === true
    return Promise.all(
      items.map((item) =>
        this.batches.submit(item.runId, { item: { ...item, text: clean(item.text) }, keep }).then((r) => {
          if (r instanceof TurnNotStored) throw r
          return r
        }),
      ),
    )
  }

  /** Turns queued or being written, over all runs. */
  get pending(): number {
    return this.batches.pending
  }

  /** Resolves once every turn handed in so far is stored and published (or failed). */
  flush(): Promise<void> {
    return this.batches.flush()
  }

  /** One statement for the batch, then the duplicates looked up, then the new turns published in seq order. */
  private async store(runId: number, batch: readonly Pending[]): Promise<Array<StoredTurn | TurnNotStored>> {
    // A key twice in one batch: the first is stored, the later ones answer with it.
    const firstOf = new Map<string, number>()
    const unique: Pending[] = []
    /** Where each unique turn stands in the batch. */
    const positions: number[] = []
    const sameAs: Array<[number, number]> = []
    for (const [at, p] of batch.entries()) {
      const key = dedupeKey(p.item)
      const first = key === undefined ? undefined : firstOf.get(key)
      if (first !== undefined) sameAs.push([at, first])
      else {
        if (key !== undefined) firstOf.set(key, unique.length)
        unique.push(p)
        positions.push(at)
      }
    }
    const stored = await storeTurnBatch(
      this.sql,
      runId,
      unique.map((p) => p.item),
    )
    const results: Array<StoredTurn | undefined> = new Array(unique.length)
    for (const s of stored) {
      const t = unique[s.ord]!.item
      results[s.ord] = {
        created: true,
        turn: {
          turn_id: s.id,
          seq: s.seq,
          run_id: t.runId,
          target_id: t.targetId,
          call_id: t.callId,
          turn_index: t.turnIndex,
          speaker: t.speaker,
          text: t.text,
          at: t.at.toISOString(),
          outcome_id: t.outcomeId,
          ...(t.interrupted === true && { interrupted: true as const }),
          ...(t.latencyMs != null && { latency_ms: t.latencyMs }),
          ...(t.arm !== undefined && { arm: t.arm }),
        },
      }
    }
    const missing: number[] = []
    for (let i = 0; i < unique.length; i++) if (results[i] === undefined) missing.push(i)
    if (missing.length > 0) {
      const found = await existingTurns(
        this.sql,
        missing.map((i) => unique[i]!.item),
      )
      for (const f of found) {
        const { ord, ...turn } = f
        results[missing[ord]!] = { created: false, turn }
      }
    }
    // Published after the commit, in seq order (the statement numbered them in batch order).
    for (let i = 0; i < unique.length; i++) {
      const r = results[i]
      if (r?.created) {
        const t = r.turn
        try {
          this.bus.publish(turnSubject(unique[i]!.item.tenantId, t.run_id, t.target_id), t)
        } catch (err) {
          this.log.warn({ err, run_id: t.run_id }, "could not publish a turn")
        }
      }
    }
    const out: Array<StoredTurn | TurnNotStored> = new Array(batch.length)
    for (let i = 0; i < unique.length; i++) out[positions[i]!] = results[i] ?? new TurnNotStored()
    for (const [at, first] of sameAs) {
      const r = results[first]
      out[at] = r !== undefined ? { created: false, turn: r.turn } : new TurnNotStored()
    }
    return out
  }
}

/**
 * The process's one turn writer (the api and runtime roles share it): per run, one statement in
 * flight at a time, whatever else arrives waits for it. Built with the app's services; what is
 * still queued when the process stops is written before the database closes.
 */
export class TurnWriters extends Context.Tag("parley/TurnWriters")<TurnWriters, TurnWriter>() {}

export const TurnWritersLive: Layer.Layer<TurnWriters, never, Db | Bus | Log> = Layer.scoped(
  TurnWriters,
  Effect.gen(function* () {
    const writer = new TurnWriter((yield* Db).sql, yield* Bus, yield* Log)
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => writer.flush()).pipe(Effect.timeout("10 seconds"), Effect.ignore),
    )
    return writer
  }),
)
