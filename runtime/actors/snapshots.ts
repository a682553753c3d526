// Writes an actor's persisted snapshots with one write in flight: a snapshot that arrives while
// one is being written replaces any other waiting, so only the latest is written next.
import type { Logger } from "pino"

export class SnapshotWriter {
  private inFlight: Promise<void> | undefined
  private pending: { value: unknown } | undefined

  constructor(
    private readonly save: (snapshot: unknown) => PromiseLike<unknown>,
    private readonly log: Logger,
  ) {}

  write(snapshot: unknown): void {
    this.pending = { value: snapshot }
    if (this.inFlight === undefined) this.inFlight = this.drain()
  }

  /** Resolves once every snapshot handed over so far is written (or failed and logged). */
  async flush(): Promise<void> {
    while (this.inFlight !== undefined) await this.inFlight
  }

  private async drain(): Promise<void> {
    while (this.pending !== undefined) {
      const { value } = this.pending
      this.pending = undefined
      try {
        await this.save(value)
      } catch (err) {
        this.log.error({ err }, "could not persist an actor snapshot")
      }
    }
    this.inFlight = undefined
  }
}
