// Live approval changes in one api process (GET /api/approvals/stream): one bus subscription per
// workspace being watched, shared by its watchers; each change framed once and written to each
// watcher once per event-loop turn. The stream terms are the turn hub's (src/turns/turn-hub.ts):
// its sink, its settings (keepalive, buffer cap), its reconnect frame and its dropped-client metric.
import type { Logger } from "pino"
import type { BusClient, BusSubscription } from "../platform/bus/bus.js"
import { sseDropped } from "../platform/metrics.js"
import { type ApprovalChanged, approvalsSubject } from "../platform/subjects.js"
import { type HubSettings, reconnectDelayMs, reconnectFrame, type StreamSink, sinkVerdict } from "../turns/turn-hub.js"

/** An approval change as the stream sends it: unnamed, no id (a reconnect refetches the queue). */
export const approvalFrame = (c: ApprovalChanged): string =>
  `data: ${JSON.stringify({ approval_id: c.approval_id, status: c.status, at: c.at })}\n\n`

export class ApprovalWatcher {
  closed = false
  lastWriteAt: number
  /** Frames waiting for this event-loop turn's flush. */
  out: string[] = []

  constructor(
    readonly tenantId: number,
    readonly sink: StreamSink,
    now: number,
  ) {
    this.lastWriteAt = now
  }
}

interface Room {
  readonly sub: BusSubscription
  readonly watchers: Set<ApprovalWatcher>
}

export class ApprovalHub {
  private readonly rooms = new Map<number, Room>()
  private readonly dirty = new Set<ApprovalWatcher>()
  private flushScheduled = false
  /** Runs only while someone watches, so an idle process holds no timer. */
  private ticker: NodeJS.Timeout | undefined
  private busConnected = true

  constructor(
    private readonly bus: BusClient,
    private readonly log: Logger,
    private readonly settings: HubSettings,
    private readonly now: () => number = Date.now,
  ) {}

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
          w.out.push(frame)
          this.markDirty(w)
        }
      })
      room = { sub, watchers }
      this.rooms.set(tenantId, room)
    }
    const w = new ApprovalWatcher(tenantId, sink, this.now())
    room.watchers.add(w)
    this.ticker ??= setInterval(() => this.tick(), Math.max(10, Math.floor(this.settings.keepaliveMs / 3)))
    this.ticker.unref()
    await this.bus.flush()
    return w
  }

  leave(w: ApprovalWatcher): void {
    if (w.closed) return
    w.closed = true
    this.dirty.delete(w)
    const room = this.rooms.get(w.tenantId)
    if (room?.watchers.delete(w) && room.watchers.size === 0) {
      this.rooms.delete(w.tenantId)
      room.sub.unsubscribe()
    }
    if (this.rooms.size === 0 && this.ticker !== undefined) {
      clearInterval(this.ticker)
      this.ticker = undefined
    }
    if (!w.sink.closed) w.sink.end()
  }

  private markDirty(w: ApprovalWatcher): void {
    this.dirty.add(w)
    if (this.flushScheduled) return
    this.flushScheduled = true
    // Never write from inside the bus's handler: one cork per watcher, after the turn's messages.
    setImmediate(() => this.flush())
  }

  private flush(): void {
    this.flushScheduled = false
    const now = this.now()
    for (const w of this.dirty) {
      const frames = w.out
      w.out = []
      if (frames.length === 0 || w.closed) continue
      const chunk = frames.join("")
      const verdict = sinkVerdict(w.sink, chunk, this.settings.maxBufferedBytes)
      if (verdict === "behind") {
        this.log.warn(
          { tenant_id: w.tenantId, buffered: w.sink.bufferedBytes() },
          "dropping an approval-stream client that stopped reading",
        )
        sseDropped.inc()
      }
      if (verdict !== "ok") {
        this.leave(w)
        continue
      }
      w.lastWriteAt = now
      void w.sink.write(chunk)
    }
    this.dirty.clear()
  }

  /**
   * Keepalives for quiet watchers; and after a bus outage, changes published meanwhile never came:
   * each watcher is told to reconnect, and the client reads the queue afresh when it does.
   */
  private tick(): void {
    const connected = this.bus.status().connected
    const back = connected && !this.busConnected
    this.busConnected = connected
    const now = this.now()
    for (const room of [...this.rooms.values()])
      for (const w of [...room.watchers]) {
        if (back) {
          const chunk = w.out.join("") + reconnectFrame(reconnectDelayMs(), "bus_reconnected")
          w.out = []
          if (!w.sink.closed) void w.sink.write(chunk)
          this.leave(w)
        } else if (now - w.lastWriteAt >= this.settings.keepaliveMs) {
          w.out.push(": keepalive\n\n")
          this.markDirty(w)
        }
      }
  }

  /**
   * The process is stopping: each watcher is told to reconnect (to another api process, spread over
   * a second) and reads the queue afresh there.
   */
  goodbye(): void {
    for (const room of [...this.rooms.values()])
      for (const w of [...room.watchers]) {
        const chunk = w.out.join("") + reconnectFrame(reconnectDelayMs())
        w.out = []
        if (!w.sink.closed) void w.sink.write(chunk)
        this.leave(w)
      }
  }

  /** Ends every stream (the process is stopping). */
  close(): void {
    for (const room of [...this.rooms.values()]) for (const w of [...room.watchers]) this.leave(w)
  }
}
