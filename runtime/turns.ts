// Transcript turns leave a runtime process here: each gets its run-wide `seq`, goes out at once on
// the bus (turns.<tenant>.<run>.<target>) and into Postgres in batches. Seqs come from blocks
// reserved in the run's row, so a process that takes a run over never reuses one already sent.
import type { Logger } from "pino"
import type { BusClient } from "../src/bus/bus.js"
import type { Sql } from "../src/services/Db.js"
import { reserveTurnSeqs, insertTurns, type TurnRow } from "./runtime.repo.js"

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

/** The bus message of one turn (and the shape SSE clients receive). */
export interface TurnMessage {
  readonly seq: number
  readonly run_id: number
  readonly target_id: number
  readonly call_id: number
  readonly turn_index: number
  readonly speaker: TurnIn["speaker"]
  readonly text: string
  readonly at: string
}

export const turnSubject = (tenantId: number, runId: number, targetId: number | "*" | ">") => `turns.${tenantId}.${runId}.${targetId}`

const SEQ_BLOCK = 256
const FLUSH_MS = 100
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
  private timer: NodeJS.Timeout | undefined
  private writing: Promise<void> = Promise.resolve()

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
    const msg: TurnMessage = { seq, run_id: t.runId, target_id: t.targetId, call_id: t.callId, turn_index: t.turnIndex, speaker: t.speaker, text: t.text, at: at.toISOString() }
    try {
      this.bus.publish(turnSubject(t.tenantId, t.runId, t.targetId), msg)
    } catch (err) {
      this.log.warn({ err, run_id: t.runId }, "could not publish a turn")
    }
    this.rows.push({ tenant_id: t.tenantId, run_id: t.runId, target_id: t.targetId, call_id: t.callId, seq, turn_index: t.turnIndex, speaker: t.speaker, text: t.text, at })
    if (this.rows.length >= FLUSH_ROWS) void this.flush()
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS)
  }

  /** Writes the turns emitted so far; resolves when they are stored. */
  flush(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    const rows = this.rows
    this.rows = []
    this.writing = this.writing.then(async () => {
      if (rows.length === 0) return
      try {
        await insertTurns(this.sql, rows)
      } catch (err) {
        this.log.error({ err, turns: rows.length }, "could not store turns")
      }
    })
    return this.writing
  }
}
