// Answers of a workspace's list reads kept in memory, so a dashboard's polls are answered in the
// request callback without a database round trip. An answer is kept only while this process hears
// every change: the database announces each commit that touches the tables the lists read (a
// statement trigger's NOTIFY, migration 0046), and a change made through the api is applied here
// before its response goes out (api/pipeline/cached-reads.ts). An answer read while a change of
// its workspace arrived is not kept: each workspace has a generation, and a load's answer is
// stored only if the generation it started under is still current.

/** What a load started under: compared when its answer is offered to the cache. */
export interface Ticket {
  readonly tenantId: number
  readonly generation: number
  readonly epoch: number
}

export interface Cached {
  readonly body: Buffer
  readonly contentType: string
  /** performance.now() past which the answer is stale (its age bound, or a time it depends on). */
  readonly until: number
}

interface Workspace {
  generation: number
  readonly answers: Map<string, Cached>
}

export interface WorkspaceReadsLimits {
  /** Distinct reads kept per workspace (filters, pages); the oldest goes first. */
  readonly perWorkspace: number
  /** Workspaces with answers kept; the least recently stored goes first. */
  readonly workspaces: number
  /** Bytes of answers kept in all. */
  readonly bytes: number
  /** The longest an answer is kept, whatever it heard: a bound if a notification is ever lost. */
  readonly maxAgeMs: number
}

export const DEFAULT_LIMITS: WorkspaceReadsLimits = {
  perWorkspace: 32,
  workspaces: 10_000,
  bytes: 64 * 1024 * 1024,
  maxAgeMs: 10_000,
}

export class WorkspaceReads {
  private readonly workspaces = new Map<number, Workspace>()
  /** Bumped by a change of unknown workspace: every ticket issued before it is void. */
  private epoch = 0
  private bytes = 0
  private live = false

  constructor(
    private readonly limits: WorkspaceReadsLimits = DEFAULT_LIMITS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Whether changes are being heard; while not, nothing is answered from memory or kept. */
  get listening(): boolean {
    return this.live
  }

  /** Listening (re)started or stopped: what was kept may have missed changes either way. */
  setListening(live: boolean): void {
    this.live = live
    this.changedAll()
  }

  /** The kept answer to `key` in the workspace, if fresh. */
  get(tenantId: number, key: string): Cached | undefined {
    if (!this.live) return undefined
    const answer = this.workspaces.get(tenantId)?.answers.get(key)
    return answer === undefined || answer.until <= this.now() ? undefined : answer
  }

  /** Taken before a load starts; `offer` keeps its answer only if no change came in between. */
  ticket(tenantId: number): Ticket {
    return { tenantId, generation: this.workspaces.get(tenantId)?.generation ?? 0, epoch: this.epoch }
  }

  /** Keeps a load's answer, unless a change of its workspace arrived since `ticket`. */
  offer(ticket: Ticket, key: string, body: Buffer, contentType: string, untilMs?: number): boolean {
    if (!this.live || ticket.epoch !== this.epoch) return false
    let ws = this.workspaces.get(ticket.tenantId)
    if ((ws?.generation ?? 0) !== ticket.generation || body.length > this.limits.bytes / 16) return false
    if (ws === undefined) {
      ws = { generation: ticket.generation, answers: new Map() }
      this.workspaces.set(ticket.tenantId, ws)
      if (this.workspaces.size > this.limits.workspaces) this.dropOldestWorkspace()
    } else {
      // Most recently stored last, so the oldest workspace is the first in the map.
      this.workspaces.delete(ticket.tenantId)
      this.workspaces.set(ticket.tenantId, ws)
    }
    const old = ws.answers.get(key)
    if (old !== undefined) {
      this.bytes -= old.body.length
      ws.answers.delete(key)
    }
    const now = this.now()
    const until = Math.min(now + this.limits.maxAgeMs, untilMs === undefined ? Infinity : now + untilMs)
    ws.answers.set(key, { body, contentType, until })
    this.bytes += body.length
    if (ws.answers.size > this.limits.perWorkspace) {
      const [first, dropped] = ws.answers.entries().next().value as [string, Cached]
      ws.answers.delete(first)
      this.bytes -= dropped.body.length
    }
    while (this.bytes > this.limits.bytes && this.workspaces.size > 0) this.dropOldestWorkspace()
    return true
  }

  /** A workspace's data changed: its answers are dropped and loads under way will not be kept. */
  changed(tenantId: number): void {
    const ws = this.workspaces.get(tenantId)
    if (ws === undefined) {
      // A load may be under way with generation 0: a workspace entry remembers the change.
      this.workspaces.set(tenantId, { generation: 1, answers: new Map() })
      if (this.workspaces.size > this.limits.workspaces) this.dropOldestWorkspace()
      return
    }
    ws.generation++
    for (const a of ws.answers.values()) this.bytes -= a.body.length
    ws.answers.clear()
  }

  /** A change whose workspace is not known (or of many): everything is dropped. */
  changedAll(): void {
    this.epoch++
    this.workspaces.clear()
    this.bytes = 0
  }

  /** Answers kept, in all (for /metrics and tests). */
  get size(): number {
    let n = 0
    for (const ws of this.workspaces.values()) n += ws.answers.size
    return n
  }

  private dropOldestWorkspace(): void {
    const first = this.workspaces.keys().next()
    if (first.done) return
    const ws = this.workspaces.get(first.value)!
    for (const a of ws.answers.values()) this.bytes -= a.body.length
    this.workspaces.delete(first.value)
    // Forgetting a workspace forgets its generation: a load under way for it must not be kept.
    this.epoch++
  }
}
