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
import type { Logger } from "pino"
import type { BusClient } from "../platform/bus/bus.js"
import type { Sql } from "../platform/Db.js"
import { turnSubject } from "../platform/subjects.js"
import type { TurnMessage } from "./turn.message.js"
import { existingTurns, storeTurnBatch, type TurnToStore } from "./turns.repo.js"

/** Most turns one statement carries; more wait for the next. */
export const MAX_BATCH = 1000
const RETRY_MIN_MS = 100
const RETRY_MAX_MS = 2000

export interface StoredTurn {
  readonly turn: TurnMessage
  /** False: a turn with the same key was already stored, and `turn` is that one (not published again). */
  readonly created: boolean
}

interface Pending {
  readonly item: TurnToStore
  /** The runtime's turns are kept and written again while Postgres is away; an ingested one fails its request. */
  readonly keep: boolean
  resolve(r: StoredTurn): void
  reject(err: unknown): void
}

interface RunQueue {
  readonly runId: number
  queue: Pending[]
  writing: boolean
  failures: number
}

/** Postgres is unreachable or restarting (worth writing again), as opposed to a statement it refused. */
const isConnectionError = (err: unknown): boolean => {
  const e = err as { code?: unknown; severity?: unknown } | null
  const code = typeof e?.code === "string" ? e.code : ""
  if (e?.severity === undefined) return true
  return code.startsWith("08") || code.startsWith("57P") || code === "53300"
}

/** Postgres text cannot hold NUL. */
const clean = (text: string): string => (text.includes("\u0000") ? text.replaceAll("\u0000", "") : text)

const dedupeKey = (t: TurnToStore): string | undefined =>
  t.outcomeId !== null
    ? `o${t.tenantId}|${t.turnIndex}|${t.outcomeId}`
    : t.callId !== null
      ? `c${t.callId}|${t.turnIndex}`
      : undefined

export class TurnWriter {
  private readonly runs = new Map<number, RunQueue>()
  private readonly idle = new Set<() => void>()

  constructor(
    private readonly sql: Sql,
    private readonly bus: BusClient,
    private readonly log: Logger,
  ) {}

  /** Stores (then publishes) turns of one or more runs; resolves per turn once it is stored. */
  write(items: readonly TurnToStore[], opts: { keep?: boolean } = {}): Promise<StoredTurn[]> {
    return Promise.all(
      items.map(
        (item) =>
          new Promise<StoredTurn>((resolve, reject) => {
            let q = this.runs.get(item.runId)
            if (q === undefined)
              this.runs.set(item.runId, (q = { runId: item.runId, queue: [], writing: false, failures: 0 }))
            q.queue.push({ item: { ...item, text: clean(item.text) }, keep: opts.keep === true, resolve, reject })
            if (!q.writing) {
              q.writing = true
              const run = q
              // Whatever else arrives in this event-loop turn shares the first statement.
              setImmediate(() => void this.drain(run))
            }
          }),
      ),
    )
  }

  /** Turns queued or being written, over all runs. */
  get pending(): number {
    let n = 0
    for (const q of this.runs.values()) n += q.queue.length
    return n
  }

  /** Resolves once every turn handed in so far is stored and published (or failed). */
  flush(): Promise<void> {
    if (this.runs.size === 0) return Promise.resolve()
    return new Promise((resolve) => this.idle.add(resolve))
  }

  private async drain(q: RunQueue): Promise<void> {
    while (q.queue.length > 0) {
      const batch = q.queue.splice(0, MAX_BATCH)
      try {
        await this.store(q.runId, batch)
        q.failures = 0
      } catch (err) {
        if (isConnectionError(err)) {
          // Kept ones go back to the front, in order, and are written again after a pause.
          const kept = batch.filter((p) => p.keep)
          for (const p of batch) if (!p.keep) p.reject(err)
          q.queue.unshift(...kept)
          q.failures++
          if (q.failures === 1 || q.failures % 50 === 0)
            this.log.error({ err, run_id: q.runId, turns: kept.length }, "could not store turns; retrying")
          if (kept.length > 0)
            await new Promise((r) => setTimeout(r, Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** q.failures)))
        } else {
          // A statement Postgres refused: store them one at a time, so one bad turn fails alone.
          this.log.warn(
            { err, run_id: q.runId, turns: batch.length },
            "a batch of turns was refused; storing one by one",
          )
          for (const p of batch)
            await this.store(q.runId, [p]).catch((e: unknown) => {
              this.log.error({ err: e, run_id: q.runId }, "could not store a turn")
              p.reject(e)
            })
        }
      }
    }
    q.writing = false
    this.runs.delete(q.runId)
    if (this.runs.size === 0) for (const done of this.idle) done()
    if (this.runs.size === 0) this.idle.clear()
  }

  /** One statement for the batch, then the duplicates looked up, then the new turns published in seq order. */
  private async store(runId: number, batch: Pending[]): Promise<void> {
    // A key twice in one batch: the first is stored, the later ones answer with it.
    const firstOf = new Map<string, number>()
    const unique: Pending[] = []
    const sameAs: Array<[Pending, number]> = []
    for (const p of batch) {
      const key = dedupeKey(p.item)
      const first = key === undefined ? undefined : firstOf.get(key)
      if (first !== undefined) sameAs.push([p, first])
      else {
        if (key !== undefined) firstOf.set(key, unique.length)
        unique.push(p)
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
    for (let i = 0; i < unique.length; i++) {
      const r = results[i]
      if (r !== undefined) unique[i]!.resolve(r)
      else unique[i]!.reject(new Error("turn was neither stored nor found"))
    }
    for (const [p, first] of sameAs) {
      const r = results[first]
      if (r !== undefined) p.resolve({ created: false, turn: r.turn })
      else p.reject(new Error("turn was neither stored nor found"))
    }
  }
}

const writers = new WeakMap<Sql, TurnWriter>()

/** The process's writer for this database (one per connection pool; the api and runtime roles share it). */
export const turnWriterFor = (sql: Sql, bus: BusClient, log: Logger): TurnWriter => {
  let w = writers.get(sql)
  if (w === undefined) writers.set(sql, (w = new TurnWriter(sql, bus, log)))
  return w
}
