// Live turn streams in one api process: one bus subscription per run, shared by every client
// watching it. A client subscribes before its history is read, so nothing falls between history
// and live; events are de-duplicated by seq, and a hole in the seqs the bus delivered (two writers
// publish independently) is filled from Postgres before what follows it; each client is written
// once per event-loop turn, the run's live clients all with one buffer framed once; a client that
// stops reading is dropped when its buffer passes the cap, without slowing the others.
import type { Logger } from "pino"
import type { BusClient, BusSubscription } from "../platform/bus/bus.js"
import { DEFAULT_HUB_SETTINGS, type HubSettings, LiveClient, LiveHub, type StreamSink } from "../platform/live-hub.js"
import { runTurnsSubject } from "../platform/subjects.js"
import type { TurnMessage } from "./turn.message.js"

export const sseEvent = (t: TurnMessage): string => `id: ${t.seq}\ndata: ${JSON.stringify(t)}\n\n`

export class TurnClient extends LiveClient {
  /** Highest seq written (history or live): anything at or below it is a duplicate. */
  lastSeq: number
  /** Live events that arrived while history was being written. */
  private early: TurnMessage[] | undefined = []
  /** When the client last got a turn (idle close); `lastWriteAt`, anything (keepalive). */
  lastTurnAt: number

  constructor(
    readonly key: string,
    readonly targetId: number | undefined,
    sinceSeq: number,
    sink: StreamSink,
    now: number,
  ) {
    super(sink, now)
    this.lastSeq = sinceSeq
    this.lastTurnAt = now
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

  /** History is written and the client takes live events. */
  get live(): boolean {
    return this.early === undefined
  }
}

interface RunRoom {
  readonly sub: BusSubscription
  readonly tenantId: number
  readonly runId: number
  readonly clients: Set<TurnClient>
  /**
   * Live clients of the whole run (no target filter): nothing is done for them per turn; at the
   * flush each gets the turn's frames as one buffer, framed once for all of them.
   */
  readonly fast: Set<TurnClient>
  /** This event-loop turn's frames, in seq order. */
  batch: Array<{ seq: number; frame: string }>
  /** The highest seq let into the room (undefined before its first turn). */
  lastSeq: number | undefined
  /**
   * Turns that arrived while a hole in the seqs was being filled from Postgres, or while the room's
   * starting seq was being read.
   */
  held: TurnMessage[] | undefined
}

/**
 * Reads a run's stored turns after a seq (up to `limit`, oldest first): fills a hole in the seqs
 * the bus delivered. Seqs follow commit order (src/turns/turn-writer.ts), so every turn below one
 * received is already readable.
 */
export type HoleFill = (runId: number, afterSeq: number, limit: number) => Promise<readonly TurnMessage[]>

/**
 * A run's last stored seq (0 before its first turn). A room reads it once its subscription is
 * confirmed: every later seq reaches it on the bus, so a first turn past it is a hole like any
 * other (two writers' first turns may reach the bus out of seq order), not where the room starts.
 */
export type LastStoredSeq = (runId: number) => Promise<number>

const FILL_MAX = 1000

export class TurnHub extends LiveHub<TurnClient> {
  private readonly rooms = new Map<string, RunRoom>()
  private readonly dirtyRooms = new Set<RunRoom>()
  private stopped = false
  /** The process is stopping: every client is told to reconnect elsewhere (goodbye()). */
  private leaving = false

  constructor(
    private readonly bus: BusClient,
    log: Logger,
    settings: HubSettings = DEFAULT_HUB_SETTINGS,
    now: () => number = Date.now,
    private readonly fill?: HoleFill,
    private readonly lastStored?: LastStoredSeq,
  ) {
    super(log, settings, now, "dropping a turn-stream client that stopped reading")
    this.keepTicking(Math.min(settings.keepaliveMs, settings.idleMs) / 3)
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
    const fresh = room === undefined
    if (room === undefined) {
      let self: RunRoom
      const sub = this.bus.subscribe(runTurnsSubject(tenantId, runId), (msg) => {
        let t: TurnMessage
        try {
          t = msg.json<TurnMessage>()
        } catch {
          return
        }
        if (typeof t?.seq === "number") this.arrive(self, t)
      })
      room = self = {
        sub,
        tenantId,
        runId,
        clients: new Set(),
        fast: new Set(),
        batch: [],
        lastSeq: undefined,
        // Until the starting seq is known, what arrives waits (start()).
        held: this.lastStored === undefined ? undefined : [],
      }
      this.rooms.set(key, room)
    }
    const client = new TurnClient(key, targetId, sinceSeq, sink, this.now())
    room.clients.add(client)
    await this.bus.flush()
    if (fresh) await this.start(room)
    return client
  }

  /**
   * A new room's starting seq: the run's last stored one, read after the subscription is confirmed
   * (everything after it comes on the bus; everything up to it is in each client's history). Then
   * what arrived meanwhile goes in, in seq order, holes filled. Unread (the database away), the room
   * starts at its first turn, as it would without a store.
   */
  private async start(room: RunRoom): Promise<void> {
    if (this.lastStored === undefined) return
    let base: number | undefined
    try {
      base = await this.lastStored(room.runId)
    } catch (err) {
      this.log.warn({ err, run_id: room.runId }, "could not read where a turn stream starts")
    }
    const held = room.held ?? []
    room.held = undefined
    if (this.rooms.get(`${room.tenantId}.${room.runId}`) !== room) return
    if (base !== undefined && (room.lastSeq === undefined || base > room.lastSeq)) room.lastSeq = base
    held.sort((a, b) => a.seq - b.seq)
    for (const t of held) this.arrive(room, t)
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

  /**
   * A turn from the bus, in the room's seq order: a duplicate (or one a fill already sent) is
   * dropped; one past a hole waits while the hole is read from Postgres (two writers' turns may
   * reach the bus out of seq order).
   */
  private arrive(room: RunRoom, t: TurnMessage): void {
    if (room.held !== undefined) {
      room.held.push(t)
      return
    }
    const last = room.lastSeq
    if (last !== undefined && t.seq <= last) return
    if (last === undefined || t.seq === last + 1 || this.fill === undefined) return this.accept(room, t)
    room.held = [t]
    const fill = this.fill
    void fill(room.runId, last, Math.min(FILL_MAX, t.seq - last - 1))
      .catch((err: unknown) => {
        this.log.warn({ err, run_id: room.runId }, "could not read a hole in a turn stream")
        return [] as readonly TurnMessage[]
      })
      .then((found) => {
        const held = room.held ?? []
        room.held = undefined
        if (this.rooms.get(`${room.tenantId}.${room.runId}`) !== room) return
        for (const f of found) if (room.lastSeq === undefined || f.seq > room.lastSeq) this.accept(room, f)
        held.sort((a, b) => a.seq - b.seq)
        // The first held turn is let in after the fill, whatever it found (a hole may be for good).
        const first = held.shift()
        if (first !== undefined && (room.lastSeq === undefined || first.seq > room.lastSeq)) this.accept(room, first)
        for (const h of held) this.arrive(room, h)
      })
  }

  private accept(room: RunRoom, t: TurnMessage): void {
    room.lastSeq = t.seq
    const frame = sseEvent(t)
    room.batch.push({ seq: t.seq, frame })
    this.dirtyRooms.add(room)
    this.schedule()
    const now = this.now()
    for (const c of room.clients)
      if (!room.fast.has(c) && c.offer(t, frame)) {
        c.lastTurnAt = now
        this.markDirty(c)
      }
  }

  /** Switches the client to live events: what arrived during its history follows it, de-duplicated. */
  goLive(client: TurnClient): void {
    client.goLive()
    const room = this.rooms.get(client.key)
    if (room !== undefined && client.targetId === undefined && !client.closed) room.fast.add(client)
    if (this.leaving) this.farewell(client)
    else this.markDirty(client)
  }

  /**
   * The process is stopping (before its HTTP server ends the streams): each live client gets what
   * is queued for it and then the reconnect frame, and its stream ends; one still reading its
   * history gets the same once the history is written.
   */
  goodbye(): void {
    this.leaving = true
    for (const room of this.rooms.values()) for (const c of [...room.clients]) if (c.live) this.farewell(c)
  }

  /**
   * The bus was away (docs/operations.md): turns published meanwhile never reached this process, and
   * a hole at the end of a run would never be noticed. Each live client is told to reconnect, and
   * reads what it missed from Postgres by Last-Event-ID.
   */
  resync(): void {
    if (this.leaving) return
    for (const room of this.rooms.values())
      for (const c of [...room.clients]) if (c.live) this.farewell(c, "bus_reconnected")
  }

  protected *clients(): Iterable<TurnClient> {
    for (const room of this.rooms.values()) yield* room.clients
  }

  protected detach(client: TurnClient): void {
    const room = this.rooms.get(client.key)
    if (room === undefined) return
    room.clients.delete(client)
    room.fast.delete(client)
    if (room.clients.size === 0) {
      this.rooms.delete(client.key)
      room.sub.unsubscribe()
    }
  }

  protected describe(client: TurnClient): Record<string, unknown> {
    return { stream: client.key }
  }

  /**
   * Each run's turns of this event-loop turn to its live whole-run clients: one buffer for every
   * client that was up to date, only a client whose history ran ahead gets its own chunk.
   */
  protected override flushRooms(now: number): void {
    for (const r of this.dirtyRooms) {
      const batch = r.batch
      r.batch = []
      if (batch.length === 0 || r.fast.size === 0) continue
      const first = batch[0]!.seq
      const last = batch[batch.length - 1]!.seq
      let shared: Buffer | undefined
      for (const c of r.fast) {
        if (c.closed || c.lastSeq >= last) continue
        const chunk =
          c.lastSeq < first
            ? (shared ??= Buffer.from(batch.length === 1 ? batch[0]!.frame : batch.map((b) => b.frame).join("")))
            : batch
                .filter((b) => b.seq > c.lastSeq)
                .map((b) => b.frame)
                .join("")
        c.lastSeq = last
        c.lastTurnAt = now
        this.send(c, chunk, now)
      }
    }
    this.dirtyRooms.clear()
  }

  /** Keepalives for quiet clients; idle ones are closed. */
  protected override tick(now: number): void {
    if (this.stopped) return
    for (const c of [...this.clients()])
      if (now - c.lastTurnAt >= this.settings.idleMs) this.leave(c)
      else if (now - c.lastWriteAt >= this.settings.keepaliveMs) {
        c.queueRaw(": keepalive\n\n")
        this.markDirty(c)
      }
  }

  override close(): void {
    this.stopped = true
    super.close()
  }
}
