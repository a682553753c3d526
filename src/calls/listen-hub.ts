// Listening in on live calls in one api process (GET /api/calls/{call_id}/listen): one room per call
// listened to, holding the call's two media subjects (what the carrier sends, what the agent says)
// and a TwoTrack that lines the sides up; every tick the slots due are mixed, framed once and queued
// for each listener. The writing, the keepalives and the dropping of a listener that stopped reading
// are the live hub's (src/platform/live-hub.ts). A room ends when the call's stream stops or hangs up,
// or when the call is found over while no audio comes: its listeners get the rest and `event: end`.
import type { Logger } from "pino"
import type { BusClient, BusMsg, BusSubscription } from "../platform/bus/bus.js"
import { type HubSettings, LiveClient, LiveHub, type StreamSink } from "../platform/live-hub.js"
import { MEDIA_KIND_HEADER, mediaInSubject, mediaOutSubject } from "../platform/subjects.js"
import { mix } from "../providers/audio/g711.js"
import { type TrackSlots, TwoTrack } from "../providers/audio/two-track.js"

/** Milliseconds of the call in one slot (a μ-law frame: 160 bytes). */
const SLOT_MS = 20
/** Listeners of one call in this process, those about to join included; the next is refused (429). */
export const LISTENERS_PER_CALL = 5
/** How long after a slot's time it is mixed (real ms): the sides' frames on their way are in by then. */
const LAG_MS = 100
/** Real time between two audio events. */
const EVENT_MS = 100
/** The most slots one event carries (5 s of the call): a fast simulated call's events come more often. */
const MAX_EVENT_SLOTS = 250
/** A room that has heard nothing for this long asks whether its call is over (no stop came). */
const QUIET_MS = 2_000
/** A place kept for a listener whose stream has not opened yet is given up after this. */
const RESERVATION_MS = 10_000
/** What a listener may leave unread before it is dropped (at real time about 6 minutes of audio). */
export const LISTEN_MAX_BUFFERED_BYTES = 512 * 1024

/** Why a call's audio ended: its carrier stream stopped or closed, the agent hung up, or the call is over. */
export type ListenEnd = "stopped" | "hangup" | "ended"

/** Real time between a room's events: 100 ms, shorter for a simulated call fast enough to fill one sooner. */
export const eventEveryMs = (frameMs: number): number => Math.max(10, Math.min(EVENT_MS, MAX_EVENT_SLOTS * frameMs))

/** The first frames of a stream: how soon EventSource reconnects, and what the audio is. */
export const startFrame = (callId: number, timeScale: number): string =>
  `retry: 1000\n\nevent: start\ndata: ${JSON.stringify({
    call_id: callId,
    encoding: "audio/x-mulaw",
    sample_rate: 8000,
    time_scale: timeScale,
  })}\n\n`

/** Both sides of `slots` heard together: `ulaw` is base64 of count × 160 μ-law bytes from `from_ms`. */
export const audioFrame = (seq: number, slots: TrackSlots): string =>
  `event: audio\ndata: ${JSON.stringify({
    seq,
    from_ms: slots.from * SLOT_MS,
    ulaw: Buffer.from(mix(slots.callee, slots.agent)).toString("base64"),
  })}\n\n`

export const endFrame = (reason: ListenEnd): string => `event: end\ndata: ${JSON.stringify({ reason })}\n\n`

/** Whether a call is still live; a room whose audio fell quiet asks. */
export type CallStillLive = (tenantId: number, callId: number) => Promise<boolean>

export class Listener extends LiveClient {
  constructor(
    readonly key: string,
    readonly callId: number,
    sink: StreamSink,
    now: number,
  ) {
    super(sink, now)
  }
}

/** A place kept for a listener between the route's checks and its stream's opening. */
export interface ListenTicket {
  readonly tenantId: number
  readonly callId: number
  readonly timeScale: number
  /** Gives the place back (the stream never opened); joining takes it. */
  release(): void
}

interface Room {
  readonly key: string
  readonly tenantId: number
  readonly callId: number
  readonly track: TwoTrack
  readonly subs: BusSubscription[]
  readonly listeners: Set<Listener>
  readonly timer: NodeJS.Timeout
  seq: number
  /** When a media message last came (either side), or the call was last found live. */
  heardAt: number
  asking: boolean
}

export class ListenHub extends LiveHub<Listener> {
  private readonly rooms = new Map<string, Room>()
  private readonly reserved = new Map<string, number>()

  constructor(
    private readonly bus: BusClient,
    log: Logger,
    settings: HubSettings,
    now: () => number = Date.now,
    private readonly stillLive?: CallStillLive,
  ) {
    super(log, settings, now, "dropping a listen-stream client that stopped reading")
  }

  /** Listeners of one call in this process (0: none, and no subscription). */
  listening(tenantId: number, callId: number): number {
    return this.rooms.get(keyOf(tenantId, callId))?.listeners.size ?? 0
  }

  /**
   * Keeps a place for a listener of the call, or undefined when it has LISTENERS_PER_CALL already
   * (those whose streams are opening count). The place is taken by join(), or given back by
   * release() or after RESERVATION_MS, whichever comes first.
   */
  reserve(tenantId: number, callId: number, timeScale: number): ListenTicket | undefined {
    const key = keyOf(tenantId, callId)
    const held = (this.rooms.get(key)?.listeners.size ?? 0) + (this.reserved.get(key) ?? 0)
    if (held >= LISTENERS_PER_CALL) return undefined
    this.reserved.set(key, (this.reserved.get(key) ?? 0) + 1)
    let kept = true
    const timer = setTimeout(() => release(), RESERVATION_MS)
    timer.unref()
    const release = () => {
      if (!kept) return
      kept = false
      clearTimeout(timer)
      const n = (this.reserved.get(key) ?? 1) - 1
      if (n > 0) this.reserved.set(key, n)
      else this.reserved.delete(key)
    }
    return { tenantId, callId, timeScale, release }
  }

  /**
   * Takes the ticket's place: the listener joins its call's room (subscribed now if it is the first)
   * and is sent the stream's first frames; resolves once the bus has confirmed the subscriptions.
   */
  async join(ticket: ListenTicket, sink: StreamSink): Promise<Listener> {
    ticket.release()
    const key = keyOf(ticket.tenantId, ticket.callId)
    const room = this.rooms.get(key) ?? this.open(key, ticket)
    const listener = new Listener(key, ticket.callId, sink, this.now())
    room.listeners.add(listener)
    listener.queueRaw(startFrame(ticket.callId, ticket.timeScale))
    this.markDirty(listener)
    // Keepalives run only while someone listens, so an idle process holds no timer.
    this.keepTicking(this.settings.keepaliveMs / 3)
    await this.bus.flush()
    return listener
  }

  private open(key: string, t: ListenTicket): Room {
    const frameMs = SLOT_MS * t.timeScale
    const track = new TwoTrack({ frameMs, lagMs: LAG_MS })
    const room: Room = {
      key,
      tenantId: t.tenantId,
      callId: t.callId,
      track,
      subs: [],
      listeners: new Set(),
      timer: setInterval(() => this.pump(room), eventEveryMs(frameMs)),
      seq: 0,
      heardAt: this.now(),
      asking: false,
    }
    room.timer.unref()
    room.subs.push(
      this.bus.subscribe(mediaInSubject(t.tenantId, t.callId), (msg) => this.heard(room, "callee", msg)),
      this.bus.subscribe(mediaOutSubject(t.tenantId, t.callId), (msg) => this.heard(room, "agent", msg)),
    )
    this.rooms.set(key, room)
    return room
  }

  /** A media message of either side: audio goes on its track; the stream's end ends the room. */
  private heard(room: Room, side: "callee" | "agent", msg: BusMsg): void {
    if (this.rooms.get(room.key) !== room) return
    room.heardAt = this.now()
    const kind = msg.headers?.[MEDIA_KIND_HEADER]
    if (kind === "media") room.track.push(side, msg.data)
    else if (side === "callee" && (kind === "stop" || kind === "closed")) this.end(room, "stopped")
    else if (side === "agent" && kind === "hangup") this.end(room, "hangup")
  }

  /** One tick of a room: the slots due, mixed, to every listener; a quiet room asks after its call. */
  private pump(room: Room): void {
    const slots = room.track.take()
    if (slots !== undefined) this.broadcast(room, audioFrame(room.seq++, slots))
    const now = this.now()
    if (this.stillLive === undefined || room.asking || now - room.heardAt < QUIET_MS) return
    room.asking = true
    this.stillLive(room.tenantId, room.callId).then(
      (live) => {
        room.asking = false
        room.heardAt = this.now()
        if (!live && this.rooms.get(room.key) === room) this.end(room, "ended")
      },
      (err: unknown) => {
        room.asking = false
        room.heardAt = this.now()
        this.log.warn({ err, call_id: room.callId }, "could not read whether a listened call is over")
      },
    )
  }

  private broadcast(room: Room, frame: string): void {
    for (const l of room.listeners) {
      l.queueRaw(frame)
      this.markDirty(l)
    }
  }

  /** The call's audio is over: each listener gets what is queued, the rest of the audio and `end`. */
  private end(room: Room, reason: ListenEnd): void {
    this.dissolve(room)
    const rest = room.track.takeAll()
    const tail = (rest === undefined ? "" : audioFrame(room.seq++, rest)) + endFrame(reason)
    for (const l of [...room.listeners]) {
      const chunk = l.take().join("") + tail
      if (!l.sink.closed) void l.sink.write(chunk)
      this.leave(l)
    }
  }

  /** Stops the room's subscriptions and ticks, and forgets it (its listeners are left to the caller). */
  private dissolve(room: Room): void {
    if (this.rooms.get(room.key) === room) this.rooms.delete(room.key)
    clearInterval(room.timer)
    for (const s of room.subs.splice(0)) s.unsubscribe()
    if (this.rooms.size === 0) this.stopTicking()
  }

  protected *clients(): Iterable<Listener> {
    for (const room of this.rooms.values()) yield* room.listeners
  }

  protected detach(l: Listener): void {
    const room = this.rooms.get(l.key)
    if (room?.listeners.delete(l) && room.listeners.size === 0) this.dissolve(room)
  }

  protected describe(l: Listener): Record<string, unknown> {
    return { call_id: l.callId }
  }
}

const keyOf = (tenantId: number, callId: number): string => `${tenantId}.${callId}`
