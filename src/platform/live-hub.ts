// The one live-stream hub of an api process, which the turn streams (src/turns/turn-hub.ts) and the
// approval streams (src/approvals/approval-hub.ts) specialise: the terms of a stream (its sink, its
// settings, the reconnect frame), and the writing — each client is written once per event-loop turn,
// whatever arrived for it; a client that stops reading is dropped once its unsent bytes would pass
// the cap, without slowing the others; quiet clients get keepalives; a stopping process tells every
// client to reconnect elsewhere. A hub says only where its clients live and what they are sent.
import type { Logger } from "pino"
import { sseDropped } from "./http.metrics.js"

/** What a hub needs from a client's connection (the HTTP layer's stream writer). */
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

/**
 * The last frame of a stream this process ends because it is stopping: a named event (a browser's
 * EventSource dispatches it only to a `reconnect` listener) and a short, jittered `retry:`, so the
 * client reconnects (to another api process) soon, resuming with Last-Event-ID. It carries no
 * `id:`, so the client's last event id stays the last event's.
 */
export const reconnectFrame = (
  retryMs: number,
  reason: "server_shutting_down" | "bus_reconnected" = "server_shutting_down",
): string => {
  const data = JSON.stringify({ reason, retry_ms: retryMs })
  return `event: reconnect\nretry: ${retryMs}\ndata: ${data}\n\n`
}

/** How soon clients of a stopping process reconnect: spread over a second so they do not arrive at once. */
export const reconnectDelayMs = (): number => 250 + Math.floor(Math.random() * 1000)

/**
 * Whether a chunk may be written to a stream's sink: `closed` (the client left), `behind` (it has
 * not taken what it was sent, and this chunk would pass the cap: drop the client), else `ok`. A
 * client that keeps up (nothing waiting) always gets its chunk whole, however large.
 */
export const sinkVerdict = (sink: StreamSink, chunk: string | Buffer, cap: number): "ok" | "closed" | "behind" => {
  if (sink.closed) return "closed"
  const behind = sink.bufferedBytes()
  const size = typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.byteLength
  return behind > 0 && behind + size > cap ? "behind" : "ok"
}

const KEEPALIVE = ": keepalive\n\n"

/** One client of a live stream: its sink, the frames waiting for the next flush, when it last got anything. */
export class LiveClient {
  closed = false
  lastWriteAt: number
  protected out: string[] = []

  constructor(
    readonly sink: StreamSink,
    now: number,
  ) {
    this.lastWriteAt = now
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

export abstract class LiveHub<C extends LiveClient> {
  private readonly dirty = new Set<C>()
  private flushScheduled = false
  private ticker: NodeJS.Timeout | undefined

  constructor(
    protected readonly log: Logger,
    protected readonly settings: HubSettings,
    protected readonly now: () => number,
    /** The log line of a dropped client: "dropping a turn-stream client that stopped reading". */
    private readonly dropped: string,
  ) {}

  /** Every client of the hub (keepalives, goodbye, close). */
  protected abstract clients(): Iterable<C>
  /** Takes a leaving client out of its room (and drops the room's subscription with its last client). */
  protected abstract detach(client: C): void
  /** What the log says of a dropped client. */
  protected abstract describe(client: C): Record<string, unknown>

  /** After the clients' own frames, once per flush (the turn hub's run-wide buffers). */
  protected flushRooms(_now: number): void {}

  /** Keepalives for quiet clients (a hub may close idle ones, or tell them to reconnect, instead). */
  protected tick(now: number): void {
    for (const c of [...this.clients()])
      if (now - c.lastWriteAt >= this.settings.keepaliveMs) {
        c.queueRaw(KEEPALIVE)
        this.markDirty(c)
      }
  }

  leave(client: C): void {
    if (client.closed) return
    client.closed = true
    this.dirty.delete(client)
    this.detach(client)
    if (!client.sink.closed) client.sink.end()
  }

  /** Ends every stream (the process is stopping). */
  close(): void {
    this.stopTicking()
    for (const c of [...this.clients()]) this.leave(c)
  }

  protected markDirty(client: C): void {
    this.dirty.add(client)
    this.schedule()
  }

  protected schedule(): void {
    if (this.flushScheduled) return
    this.flushScheduled = true
    // Never write from inside the bus's handler: one write per client per event-loop turn, however
    // many events arrived in it.
    setImmediate(() => this.flush())
  }

  /** Writes a chunk to a client, or drops the client if it is gone or too far behind. */
  protected send(client: C, chunk: string | Buffer, now: number): void {
    const verdict = sinkVerdict(client.sink, chunk, this.settings.maxBufferedBytes)
    if (verdict === "behind") {
      this.log.warn({ ...this.describe(client), buffered: client.sink.bufferedBytes() }, this.dropped)
      sseDropped.inc()
    }
    if (verdict !== "ok") {
      this.leave(client)
      return
    }
    client.lastWriteAt = now
    void client.sink.write(chunk)
  }

  /** What is queued for the client, then the reconnect frame; its stream ends. */
  protected farewell(client: C, reason?: Parameters<typeof reconnectFrame>[1]): void {
    if (client.closed) return
    const chunk = client.take().join("") + reconnectFrame(reconnectDelayMs(), reason)
    if (!client.sink.closed) void client.sink.write(chunk)
    this.leave(client)
  }

  /** Ticks every `ms` (unref'd) until stopTicking(); a second call changes nothing. */
  protected keepTicking(ms: number): void {
    if (this.ticker !== undefined) return
    this.ticker = setInterval(() => this.tick(this.now()), Math.max(10, Math.floor(ms)))
    this.ticker.unref()
  }

  protected stopTicking(): void {
    if (this.ticker === undefined) return
    clearInterval(this.ticker)
    this.ticker = undefined
  }

  private flush(): void {
    this.flushScheduled = false
    const now = this.now()
    for (const c of this.dirty) {
      const frames = c.take()
      if (frames.length === 0 || c.closed) continue
      this.send(c, frames.length === 1 ? frames[0]! : frames.join(""), now)
    }
    this.dirty.clear()
    this.flushRooms(now)
  }
}
