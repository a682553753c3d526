// Transcript turns leave a runtime process here: each gets its run-wide `seq`, is stored in Postgres (one insert in
// flight, later turns batched behind it) and then published on the bus (turns.<tenant>.<run>.<target>). Stored before
// published: a watcher that subscribes and then reads history cannot miss a turn between the two. Seqs come from
// blocks reserved in the run's row, so a process that takes a run over never reuses one already sent.
import type { Logger } from "pino"
import type { BusClient } from "../src/platform/bus/bus.js"
import type { Sql } from "../src/platform/Db.js"
import { turnSubject } from "../src/platform/subjects.js"
import { reserveTurnSeqs } from "../src/runs/runs.repo.js"
import type { TurnMessage } from "../src/turns/turn.message.js"
import { insertTurns, type TurnRow } from "../src/turns/turns.repo.js"

export interface TurnIn {
  readonly tenantId: number
  readonly runId: number
  readonly targetId: number
  readonly callId: number
  readonly turnIndex: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  /** Epoch ms. */
  readonly at: number
}

const SEQ_BLOCK = 256
/** Most turns one insert carries; more wait for the next. */
const FLUSH_ROWS = 500

interface RunSeqs {
  next: number
  end: number
  waiting: TurnIn[]
  reserving: boolean
}

export class TurnSink {
  private readonly runs = new Map<number, RunSeqs>()
  private rows: TurnRow[] = []
  /** An insert is in flight: turns arriving meanwhile wait and go in the next one. */
  private inFlight: Promise<void> | undefined

  constructor(
    private readonly sql: Sql,
    private readonly bus: BusClient,
    private readonly log: Logger,
  ) {}

  push(turn: TurnIn): void {
    let seqs = this.runs.get(turn.runId)
    if (seqs === undefined) this.runs.set(turn.runId, (seqs = { next: 1, end: 0, waiting: [], reserving: false }))
    seqs.waiting.push(turn)
    this.pump(turn.runId, seqs)
  }

  /** Forgets a run's seq block (it ended or moved to another process). */
  forget(runId: number): void {
    this.runs.delete(runId)
  }

  private pump(runId: number, seqs: RunSeqs): void {
    while (seqs.waiting.length > 0 && seqs.next <= seqs.end) this.emit(seqs.waiting.shift()!, seqs.next++)
    if (seqs.waiting.length === 0 || seqs.reserving) return
    seqs.reserving = true
    reserveTurnSeqs(this.sql, runId, SEQ_BLOCK).then(
      (first) => {
        seqs.reserving = false
        seqs.next = first
        seqs.end = first + SEQ_BLOCK - 1
        this.pump(runId, seqs)
      },
      (err: unknown) => {
        seqs.reserving = false
        this.log.error({ err, run_id: runId }, "could not reserve turn seqs; retrying")
        setTimeout(() => this.pump(runId, seqs), 500).unref()
      },
    )
  }

  private emit(t: TurnIn, seq: number): void {
    const at = new Date(t.at)
    this.rows.push({
      tenant_id: t.tenantId,
      run_id: t.runId,
      target_id: t.targetId,
      call_id: t.callId,
      seq,
      turn_index: t.turnIndex,
      speaker: t.speaker,
      text: t.text,
      at,
    })
    // Stored at once when nothing is being written (no timer to wait out: a watcher sees a turn
    // one insert after it was said); batched only under load, while an insert is in flight.
    this.inFlight ??= this.drain()
  }

  private async drain(): Promise<void> {
    // Turns emitted in the same tick share the first insert.
    await Promise.resolve()
    while (this.rows.length > 0) {
      const rows = this.rows.splice(0, FLUSH_ROWS)
      const ids = new Map<string, number>()
      try {
        for (const s of await insertTurns(this.sql, rows)) ids.set(`${s.run_id}:${s.seq}`, s.id)
      } catch (err) {
        // Watchers still get them live; only a later history read will lack them.
        this.log.error({ err, turns: rows.length }, "could not store turns")
      }
      for (const r of rows) {
        const msg: TurnMessage = {
          turn_id: ids.get(`${r.run_id}:${r.seq}`) ?? null,
          seq: r.seq,
          run_id: r.run_id,
          target_id: r.target_id,
          call_id: r.call_id,
          turn_index: r.turn_index,
          speaker: r.speaker,
          text: r.text,
          at: r.at.toISOString(),
        }
        try {
          this.bus.publish(turnSubject(r.tenant_id, r.run_id, r.target_id), msg)
        } catch (err) {
          this.log.warn({ err, run_id: r.run_id }, "could not publish a turn")
        }
      }
    }
    this.inFlight = undefined
  }

  /** Resolves once every turn emitted so far is stored and published. */
  async flush(): Promise<void> {
    while (this.inFlight !== undefined) await this.inFlight
  }
}
