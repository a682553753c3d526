// The knowledge-base rules one owned run follows: loaded when the run starts, reloaded when the
// bus says its workspace's rules changed (host/bus-commands.ts dispatches kb.rules.<tenant>), never polled.
// A reload that fails keeps the rules the run had; the next call to start tries again. A simulation
// campaign's run follows the rules of the workflow it rehearses (the driver passes that workflow's id).
import type { Logger } from "pino"
import { activeAgentRules } from "../../src/kb/kb.repo.js"
import type { Sql } from "../../src/platform/Db.js"
import type { AgentRule } from "../../src/providers/llm/llm.interface.js"

export class RunRules {
  private rules: ReadonlyArray<AgentRule> = []
  /** Reloads asked for, and the newest of them applied: an older answer never overwrites a newer one. */
  private asked = 0
  private applied = 0
  /** The newest reload in flight, if any. */
  private loading: Promise<void> | undefined
  /** The last load failed (or none has run): the rules may be out of date. */
  private stale = true
  private loadedOnce = false

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    /** workflowId: whose rules (with the workspace's) apply; for a simulation, the rehearsed workflow. */
    private readonly run: { readonly runId: number; readonly tenantId: number; readonly workflowId: number },
  ) {}

  /** Loads the rules again (a change was announced); resolves once this load has settled. */
  reload(): Promise<void> {
    const gen = ++this.asked
    const { runId, tenantId, workflowId } = this.run
    const load: Promise<void> = activeAgentRules(this.sql, tenantId, workflowId).then(
      (rules) => {
        if (gen <= this.applied) return
        this.applied = gen
        this.rules = rules
        this.loadedOnce = true
        if (gen === this.asked) this.stale = false
      },
      (err: unknown) => {
        if (gen === this.asked) this.stale = true
        this.log.error({ err, run_id: runId }, "could not load the run's knowledge-base rules; keeping the ones it had")
      },
    )
    this.loading = load
    void load.finally(() => {
      if (this.loading === load) this.loading = undefined
    })
    return load
  }

  /**
   * The rules for a call starting now. Waits for a reload in flight; when the last load failed,
   * tries again (waiting only if no load ever succeeded: a call never waits on a failing database
   * when it has rules to go on). Never rejects.
   */
  async current(): Promise<ReadonlyArray<AgentRule>> {
    if (this.loading === undefined && this.stale) {
      const retry = this.reload()
      if (!this.loadedOnce) await retry
    } else if (this.loading !== undefined) await this.loading
    return this.rules
  }

  /** How many rules the run follows now (logs and tests). */
  get size(): number {
    return this.rules.length
  }
}
