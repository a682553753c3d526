// Transcript turns leave a runtime process here, through the process's one turn writer
// (src/turns/turn-writer.ts) that POST /internal/turns also uses: per run, the turns that arrive
// while a write is in flight are stored together with their run-wide seqs in one statement, then
// published on the bus (turns.<tenant>.<run>.<target>) in seq order. Stored before published: a
// watcher that subscribes and then reads history cannot miss a turn between the two. While
// Postgres is away the turns wait in memory and are written again.
//
// A runtime turn carries the outcome id of its call, `call-<call_id>`, so an orchestrator that
// appends turns to the call through POST /internal/turns (that outcome_id, its own turn index as
// `seq`) is idempotent against the runtime's turns and its own retries alike.
import type { Logger } from "pino"
import type { TurnLatency } from "../../src/providers/telephony/telephony.interface.js"
import type { TurnWriter } from "../../src/turns/turn-writer.js"

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
  /** A call heard as audio: an agent turn the callee spoke over, and its latency by stage. */
  readonly interrupted?: boolean
  readonly latencyMs?: TurnLatency
  /** The experiment arm of its call, for watchers. */
  readonly arm?: string
}

/** The outcome id of a runtime call's turns. */
export const callOutcomeId = (callId: number): string => `call-${callId}`

/** How long stopping waits for turns still queued (Postgres away) before giving them up. */
const FLUSH_TIMEOUT_MS = 10_000

export class TurnSink {
  constructor(
    private readonly writer: TurnWriter,
    private readonly log: Logger,
  ) {}

  push(turn: TurnIn): void {
    this.writer
      .write(
        [
          {
            tenantId: turn.tenantId,
            runId: turn.runId,
            targetId: turn.targetId,
            callId: turn.callId,
            turnIndex: turn.turnIndex,
            speaker: turn.speaker,
            text: turn.text,
            outcomeId: callOutcomeId(turn.callId),
            at: new Date(turn.at),
            ...(turn.interrupted === true && { interrupted: true }),
            ...(turn.latencyMs !== undefined && { latencyMs: turn.latencyMs }),
            ...(turn.arm !== undefined && { arm: turn.arm }),
          },
        ],
        { keep: true },
      )
      .catch((err: unknown) => this.log.error({ err, run_id: turn.runId }, "a turn was not stored"))
  }

  /** Nothing is held per run any more (seqs come with each write); kept for the host's bookkeeping. */
  forget(_runId: number): void {}

  /** Resolves once every turn pushed so far is stored and published (or after a bounded wait). */
  async flush(): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      this.writer.flush(),
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.log.error({ turns: this.writer.pending }, "turns still unstored at shutdown")
          resolve()
        }, FLUSH_TIMEOUT_MS)
        timer.unref()
      }),
    ])
    clearTimeout(timer)
  }
}
