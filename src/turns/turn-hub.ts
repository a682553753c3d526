// Live turn streams in one api process: one bus subscription per run, shared by every client
// watching it. A client subscribes before its history is read, so nothing falls between history
// and live; events are de-duplicated by seq; each client is written once per event-loop turn, and
// one that stops reading is dropped when its buffer passes the cap, without slowing the others.
import type { Logger } from "pino"
import type { BusClient, BusSubscription } from "../platform/bus/bus.js"
import { runTurnsSubject } from "../platform/subjects.js"
import type { TurnMessage } from "./turn.message.js"

/** What the hub needs from a client's connection (the HTTP layer's stream writer). */
export interface StreamSink {
  write(chunk: string | Uint8Array): Promise<boolean>
  bufferedBytes(): number
  readonly closed: boolean
  end(): void
}

export interface HubSettings {
  readonly keepaliveMs: number
  readonly idleMs: number
  /** A client whose unsent bytes pass this is dropped. */
  readonly maxBufferedBytes: number
}

export const DEFAULT_HUB_SETTINGS: HubSettings = {
  keepaliveMs: 15_000,
  idleMs: 30 * 60_000,
  maxBufferedBytes: 1024 * 1024,
}

export const sseEvent = (t: TurnMessage): string => `id: ${t.seq}\ndata: ${JSON.stringify(t)}\n\n`

export class TurnClient {
  /** Highest seq written (history or live): anything at or below it is a duplicate. */
  lastSeq: number
  /** Live events that arrived while history was being written. */
  private early: TurnMessage[] | undefined = []
  private out: string[] = []
  /** When the client last got a turn (idle close) and last got anything (keepalive). */
  lastTurnAt: number
  lastWriteAt: number
  closed = false

  constructor(
    readonly key: string,
    readonly targetId: number | undefined,
    sinceSeq: number,
    readonly sink: StreamSink,
    now: number,
  ) {
    this.lastSeq = sinceSeq
    this.lastTurnAt = now
    this.lastWriteAt = now
  }

  /** A live event from the run's subscription. */
  offer(t: TurnMessage, frame?: string): boolean {
    if (this.targetId !== undefined && t.target_id !== this.targetId) return false
    if (this.early !== undefined) {
      this.early.push(t)
      return false
    }
    return this.queue(t, frame)
  }

  private queue(t: TurnMessage, frame?: string): boolean {
    if (t.seq <= this.lastSeq) return false
    this.lastSeq = t.seq
    this.out.push(frame ?? sseEvent(t))
    return true
  }

  /** A page of history, queued in seq order. */
  addHistory(page: readonly TurnMessage[]): void {
    for (const t of page) this.queue(t)
  }

  /** History written: what arrived meanwhile goes out, minus what history already held. */
  goLive(history: readonly TurnMessage[] = []): void {
    for (const t of history) this.queue(t)
    const early = this.early ?? []
    this.early = undefined
    early.sort((a, b) => a.seq - b.seq)
    for (const t of early) this.queue(t)
  }

  /** Takes what is queued for this client. */
  take(): string[] {
    const s = this.out
    if (s.length > 0) this.out = []
    return s
  }

  queueRaw(s: string): void {
    this.out.push(s)
  }
}

interface RunRoom {
  readonly sub: BusSubscription
  readonly clients: Set<TurnClient>
  /** This event-loop turn's frames, in arrival order, and their bytes once framed for everyone. */
  batch: string[]
  shared: Buffer | undefined
}

export class TurnHub {
  private readonly rooms = new Map<string, RunRoom>()
  private readonly dirty = new Set<TurnClient>()
  private readonly dirtyRooms = new Set<RunRoom>()
  private flushScheduled = false
  private readonly ticker: NodeJS.Timeout
  private stopped = false

  constructor(
    private readonly bus: BusClient,
    private readonly log: Logger,
    private readonly settings: HubSettings = DEFAULT_HUB_SETTINGS,
    private readonly now: () => number = Date.now,
  ) {
    this.ticker = setInterval(() => this.tick(), Math.max(10, Math.min(settings.keepaliveMs, settings.idleMs) / 3))
    this.ticker.unref()
  }

  get subscriptions(): number {
    return this.rooms.size
  }

  /** Clients watching one run in this process (undefined: nobody, and no subscription). */
  watching(tenantId: number, runId: number): number | undefined {
    return this.rooms.get(`${tenantId}.${runId}`)?.clients.size
  }

  get clientCount(): number {
    let n = 0
    for (const r of this.rooms.values()) n += r.clients.size
    return n
  }

  /**
   * Registers a client on the run's subscription (made now if it is the first) and resolves once
   * the bus has confirmed it, so history read afterwards cannot miss a live turn.
   */
  async join(
    tenantId: number,
    runId: number,
    targetId: number | undefined,
    sinceSeq: number,
    sink: StreamSink,
  ): Promise<TurnClient> {
    const key = `${tenantId}.${runId}`
    let room = this.rooms.get(key)
    if (room === undefined) {
      const clients = new Set<TurnClient>()
      let self: RunRoom
      const sub = this.bus.subscribe(runTurnsSubject(tenantId, runId), (msg) => {
        let t: TurnMessage
        try {
          t = msg.json<TurnMessage>()
        } catch {
          return
        }
        const now = this.now()
        const frame = sseEvent(t)
        self.batch.push(frame)
        this.dirtyRooms.add(self)
        for (const c of clients)
          if (c.offer(t, frame)) {
            c.lastTurnAt = now
            this.markDirty(c)
          }
      })
      room = self = { sub, clients, batch: [], shared: undefined }
      this.rooms.set(key, room)
    }
    const client = new TurnClient(key, targetId, sinceSeq, sink, this.now())
    room.clients.add(client)
    await this.bus.flush()
    return client
  }

  /**
   * Writes a page of history now; resolves when the client's socket has taken it (false: the
   * client is gone), so a long history is sent at the client's pace, one page in memory at a time.
   */
  async writeHistory(client: TurnClient, page: readonly TurnMessage[]): Promise<boolean> {
    client.addHistory(page)
    const chunk = client.take().join("")
    if (chunk === "" || client.closed) return !client.closed
    client.lastTurnAt = client.lastWriteAt = this.now()
    return client.sink.write(chunk)
  }

  /** Switches the client to live events: what arrived during its history follows it, de-duplicated. */
  goLive(client: TurnClient): void {
    client.goLive()
    this.markDirty(client)
  }

  leave(client: TurnClient): void {
    if (client.closed) return
    client.closed = true
    this.dirty.delete(client)
    const room = this.rooms.get(client.key)
    if (room === undefined) return
    room.clients.delete(client)
    if (room.clients.size === 0) {
      this.rooms.delete(client.key)
      room.sub.unsubscribe()
    }
    if (!client.sink.closed) client.sink.end()
  }

  private markDirty(c: TurnClient): void {
    this.dirty.add(c)
    if (this.flushScheduled) return
    this.flushScheduled = true
    // One write per client per event-loop turn, however many turns arrived in it.
    setImmediate(() => this.flush())
  }

  private flush(): void {
    this.flushScheduled = false
    const now = this.now()
    for (const c of this.dirty) {
      const frames = c.take()
      if (frames.length === 0 || c.closed) continue
      // A client that took exactly this turn's frames of its run gets the bytes framed once for all.
      const room = this.rooms.get(c.key)
      const chunk =
        room !== undefined &&
        frames.length === room.batch.length &&
        frames[0] === room.batch[0] &&
        frames[frames.length - 1] === room.batch[room.batch.length - 1]
          ? (room.shared ??= Buffer.from(room.batch.join("")))
          : frames.join("")
      if (c.sink.closed) {
        this.leave(c)
        continue
      }
      // A client already behind is dropped once what it has not taken, with what is queued for it
      // now, passes the cap; one that keeps up (nothing waiting) always gets a turn's events whole.
      const behind = c.sink.bufferedBytes()
      if (
        behind > 0 &&
        behind + (typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.byteLength) >
          this.settings.maxBufferedBytes
      ) {
        this.log.warn(
          { stream: c.key, buffered: c.sink.bufferedBytes() },
          "dropping a turn-stream client that stopped reading",
        )
        this.leave(c)
        continue
      }
      c.lastWriteAt = now
      void c.sink.write(chunk)
    }
    this.dirty.clear()
    for (const r of this.dirtyRooms) {
      r.batch = []
      r.shared = undefined
    }
    this.dirtyRooms.clear()
  }

  /** Keepalives for quiet clients; idle ones are closed. */
  private tick(): void {
    if (this.stopped) return
    const now = this.now()
    for (const room of this.rooms.values())
      for (const c of room.clients) {
        if (now - c.lastTurnAt >= this.settings.idleMs) this.leave(c)
        else if (now - c.lastWriteAt >= this.settings.keepaliveMs) {
          c.queueRaw(": keepalive\n\n")
          this.markDirty(c)
        }
      }
  }

  close(): void {
    this.stopped = true
    clearInterval(this.ticker)
    for (const room of this.rooms.values()) for (const c of [...room.clients]) this.leave(c)
  }
}
