// Saves one run actor's snapshot in the run's row: at once when its state changed, else at most
// once a second, and never after the run's lease was lost.
import { MACHINE_VERSIONS } from "../../machines/index.js"
import * as repo from "../../src/runs/runs.repo.js"
import type { RunScope } from "./run-scope.js"
import { SnapshotWriter } from "./snapshots.js"

/** Snapshot saves for counter changes alone are at most this frequent. */
const SNAPSHOT_THROTTLE_MS = 1000

export class RunPersistence {
  private readonly writer: SnapshotWriter
  private persistedState: string | undefined
  private timer: NodeJS.Timeout | undefined

  constructor(private readonly scope: RunScope) {
    const { sql, me, log } = scope.deps
    const save = (snapshot: unknown) => repo.saveRunSnapshot(sql, scope.runId, me, snapshot, MACHINE_VERSIONS.run)
    this.writer = new SnapshotWriter(save, log)
  }

  /**
   * Saves the run actor's snapshot: at once when its state changed, else at most once a second.
   * Counter changes come with every call, and each save locks the run's row that dial attempts
   * share-lock; a takeover recounts from the calls themselves, so a second-old count is enough.
   */
  soon(): void {
    queueMicrotask(() => {
      const s = this.scope
      if (s.lost) return
      const state = JSON.stringify(s.run.getSnapshot().value)
      if (state !== this.persistedState) {
        this.persistedState = state
        this.cancel()
        this.writer.write(s.run.getPersistedSnapshot())
      } else
        this.timer ??= setTimeout(() => {
          this.timer = undefined
          if (!s.lost) this.writer.write(s.run.getPersistedSnapshot())
        }, SNAPSHOT_THROTTLE_MS)
    })
  }

  /** Writes the latest snapshot now (a throttled save included) and waits for it. */
  now(): Promise<void> {
    this.cancel()
    if (!this.scope.lost) this.writer.write(this.scope.run.getPersistedSnapshot())
    return this.writer.flush()
  }

  /** Drops a throttled save that has not run yet. */
  cancel(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }
}
