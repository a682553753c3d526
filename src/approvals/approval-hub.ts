// Live approval changes in one api process (GET /api/approvals/stream): one bus subscription per
// workspace being watched, shared by its watchers; each change framed once and written to each
// watcher once per event-loop turn, then the workspace's pending count (an `event: pending` frame),
// read once per room after the turn's changes, and on connect. The writing, the keepalives, the
// dropping of a client that stopped reading and the reconnect frame are the live hub's
// (src/platform/live-hub.ts), as for the turn streams.
import type { Logger } from "pino"
import type { BusClient, BusSubscription } from "../platform/bus/bus.js"
import { type HubSettings, LiveClient, LiveHub, type StreamSink } from "../platform/live-hub.js"
import { type ApprovalChanged, approvalsSubject } from "../platform/subjects.js"

/** An approval change as the stream sends it: unnamed, no id (a reconnect refetches the queue). */
export const approvalFrame = (c: ApprovalChanged): string =>
  `data: ${JSON.stringify({ approval_id: c.approval_id, status: c.status, at: c.at })}\n\n`

/**
 * The workspace's pending count as the stream sends it: a named event (`pending`), so a client that
 * reads only unnamed events (EventSource.onmessage) never sees it; `at` is when it was read.
 */
export const pendingFrame = (pending: number, at: Date): string =>
  `event: pending\ndata: ${JSON.stringify({ pending, at: at.toISOString() })}\n\n`

/** Reads a workspace's pending approvals count (approval-queue.repo.ts countPending). */
export type PendingCounter = (tenantId: number) => Promise<number>

export class ApprovalWatcher extends LiveClient {
  constructor(
    readonly tenantId: number,
    sink: StreamSink,
    now: number,
  ) {
    super(sink, now)
  }
}

interface Room {
  readonly sub: BusSubscription
  readonly watchers: Set<ApprovalWatcher>
  /** A count is being read (one at a time, in order). */
  counting: boolean
  /** Who asked for the count since the last read began: watchers that joined; `all` after a change. */
  askers: Set<ApprovalWatcher>
  all: boolean
}

export class ApprovalHub extends LiveHub<ApprovalWatcher> {
  private readonly rooms = new Map<number, Room>()
  private busConnected = true

  constructor(
    private readonly bus: BusClient,
    log: Logger,
    settings: HubSettings,
    now: () => number = Date.now,
    /** Without one, the stream sends changes only (no pending counts). */
    private readonly countPending?: PendingCounter,
  ) {
    super(log, settings, now, "dropping an approval-stream client that stopped reading")
  }

  /** Watchers in this process of one workspace (0: none, and no subscription). */
  watching(tenantId: number): number {
    return this.rooms.get(tenantId)?.watchers.size ?? 0
  }

  /** Registers a watcher; resolves once the bus has confirmed the workspace's subscription. */
  async join(tenantId: number, sink: StreamSink): Promise<ApprovalWatcher> {
    let room = this.rooms.get(tenantId)
    if (room === undefined) {
      const watchers = new Set<ApprovalWatcher>()
      const sub = this.bus.subscribe(approvalsSubject(tenantId), (msg) => {
        let c: ApprovalChanged
        try {
          c = msg.json<ApprovalChanged>()
        } catch {
          return
        }
        if (typeof c?.approval_id !== "number" || typeof c.status !== "string") return
        const frame = approvalFrame(c)
        for (const w of watchers) {
          w.queueRaw(frame)
          this.markDirty(w)
        }
        this.count(tenantId, "all")
      })
      room = { sub, watchers, counting: false, askers: new Set(), all: false }
      this.rooms.set(tenantId, room)
    }
    const w = new ApprovalWatcher(tenantId, sink, this.now())
    room.watchers.add(w)
    // The ticker runs only while someone watches, so an idle process holds no timer.
    this.keepTicking(this.settings.keepaliveMs / 3)
    await this.bus.flush()
    return w
  }

  /**
   * Sends the workspace's current pending count to one watcher (on connect) or, after a change, to
   * all of them. One read at a time per room, each begun after what it answers: whatever asks while
   * one is in flight is answered by the next, so the last count a watcher gets is never older than
   * the last change it got.
   */
  count(tenantId: number, who: ApprovalWatcher | "all"): void {
    const room = this.rooms.get(tenantId)
    if (this.countPending === undefined || room === undefined) return
    if (who === "all") room.all = true
    else room.askers.add(who)
    if (!room.counting) this.readCount(tenantId, room, this.countPending)
  }

  private readCount(tenantId: number, room: Room, countPending: PendingCounter): void {
    room.counting = true
    const everyone = room.all
    const askers = room.askers
    room.all = false
    room.askers = new Set()
    const done = (n: number | undefined) => {
      room.counting = false
      if (n !== undefined) {
        const frame = pendingFrame(n, new Date(this.now()))
        for (const w of everyone ? room.watchers : askers) {
          if (w.closed) continue
          w.queueRaw(frame)
          this.markDirty(w)
        }
      }
      if ((room.all || room.askers.size > 0) && this.rooms.get(tenantId) === room)
        this.readCount(tenantId, room, countPending)
    }
    countPending(tenantId).then(done, (err: unknown) => {
      this.log.warn({ err, tenant_id: tenantId }, "could not count pending approvals")
      done(undefined)
    })
  }

  protected *clients(): Iterable<ApprovalWatcher> {
    for (const room of this.rooms.values()) yield* room.watchers
  }

  protected detach(w: ApprovalWatcher): void {
    const room = this.rooms.get(w.tenantId)
    if (room?.watchers.delete(w) && room.watchers.size === 0) {
      this.rooms.delete(w.tenantId)
      room.sub.unsubscribe()
    }
    if (this.rooms.size === 0) this.stopTicking()
  }

  protected describe(w: ApprovalWatcher): Record<string, unknown> {
    return { tenant_id: w.tenantId }
  }

  /**
   * Keepalives for quiet watchers; and after a bus outage, changes published meanwhile never came:
   * each watcher is told to reconnect, and the client reads the queue afresh when it does.
   */
  protected override tick(now: number): void {
    const connected = this.bus.status().connected
    const back = connected && !this.busConnected
    this.busConnected = connected
    if (!back) return super.tick(now)
    for (const w of [...this.clients()]) this.farewell(w, "bus_reconnected")
  }

  /**
   * The process is stopping: each watcher is told to reconnect (to another api process, spread over
   * a second) and reads the queue afresh there.
   */
  goodbye(): void {
    for (const w of [...this.clients()]) this.farewell(w)
  }
}
