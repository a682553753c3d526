// The NATS bus: one @nats-io/transport-node connection behind BusClient, with nats.js errors
// mapped to BusError codes and each subscription's handler calls serialised.

import {
  ClosedConnectionError,
  connect,
  DrainingConnectionError,
  InvalidArgumentError,
  InvalidSubjectError,
  type Msg,
  type MsgHdrs,
  NoRespondersError,
  headers as natsHeaders,
  RequestError,
  TimeoutError,
} from "@nats-io/transport-node"
import {
  type BusClient,
  BusError,
  type BusErrorCode,
  type BusMsg,
  type BusSubscription,
  DEFAULT_MAX_PAYLOAD,
  type GatherOptions,
  type Payload,
  type PublishOptions,
  type RequestOptions,
  type SubscribeOptions,
} from "./bus.js"
import { busIn, busOut, busReconnects } from "./bus.metrics.js"
import { assertQueue, assertSubject, decodeJson, decodeString, encodePayload, Mailbox } from "./bus.shared.js"

export interface NatsBusOptions {
  readonly url: string
  readonly name: string
  readonly maxPayload?: number
  /** Called when a handler throws or rejects; the subscription carries on regardless. */
  readonly onError?: (err: unknown, msg: BusMsg) => void
}

const DEFAULT_TIMEOUT_MS = 5000

/**
 * Connects once (failing fast, so a wrong URL surfaces at boot), then reconnects forever and
 * re-subscribes. While disconnected status() reports connected=false and publishes are lost:
 * nats.js v3 discards its outbound buffer on every reconnect (core NATS is at-most-once anyway).
 */
export async function connectNatsBus(opts: NatsBusOptions): Promise<BusClient> {
  const nc = await connect({
    servers: opts.url,
    name: opts.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 2000,
    reconnectJitter: 1000,
    pingInterval: 20_000,
  })
  const onError = opts.onError ?? (() => {})
  const live = new Set<BusSubscription>()
  let connected = true
  let closing = false
  let drained: Promise<void> | undefined

  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "disconnect" || s.type === "close") connected = false
      else if (s.type === "reconnect") {
        connected = true
        busReconnects.inc()
      }
    }
  })().catch(() => {}) // the status iterator ends with the connection: nothing is left to track

  // The server's limit can differ per server and change across reconnects.
  const maxPayload = (): number => Math.min(opts.maxPayload ?? DEFAULT_MAX_PAYLOAD, nc.info?.max_payload ?? Infinity)

  const ensureOpen = (allowDraining: boolean): void => {
    if (nc.isClosed() || (closing && !allowDraining)) throw new BusError("CLOSED", "bus is closed")
  }

  const publish = (subject: string, payload?: Payload, popts?: PublishOptions): void => {
    ensureOpen(true)
    assertSubject(subject, false)
    const data = encodePayload(payload, maxPayload())
    mapErrors(() => nc.publish(subject, data, { headers: toNatsHeaders(popts?.headers) }))
    busOut.inc()
  }

  const subscribe = (
    subject: string,
    handler: (msg: BusMsg) => void | Promise<void>,
    sopts?: SubscribeOptions,
  ): BusSubscription => {
    ensureOpen(false)
    assertSubject(subject, true)
    assertQueue(sopts?.queue)
    const mailbox = new Mailbox<BusMsg>(handler, onError)
    const natsSub = mapErrors(() =>
      nc.subscribe(subject, {
        ...(sopts?.queue === undefined ? {} : { queue: sopts.queue }),
        // Only permission errors arrive here, and they end the subscription server-side.
        callback: (err, m) => {
          if (err) mailbox.close()
          else {
            busIn.inc()
            mailbox.push(new NatsMsg(m, publish))
          }
        },
      }),
    )
    let drainP: Promise<void> | undefined
    const entry: BusSubscription = {
      subject,
      unsubscribe: () => {
        live.delete(entry)
        mailbox.close()
        if (!natsSub.isClosed() && !nc.isClosed()) natsSub.unsubscribe()
      },
      drain: () => {
        // nats.js resolves its drain once the server confirmed the UNSUB, i.e. every message in
        // flight has reached the callback (and so the mailbox); then the mailbox is worked off.
        drainP ??= natsSub
          .drain()
          .catch(() => {}) // a connection already closed has nothing in flight: the mailbox is worked off all the same
          .then(() => mailbox.idle())
          .then(() => {
            mailbox.close()
            live.delete(entry)
          })
        return drainP
      },
    }
    live.add(entry)
    return entry
  }

  const request = async (subject: string, payload?: Payload, ropts?: RequestOptions): Promise<BusMsg> => {
    ensureOpen(false)
    assertSubject(subject, false)
    const data = encodePayload(payload, maxPayload())
    try {
      const reply = await nc.request(subject, data, {
        timeout: ropts?.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        headers: toNatsHeaders(ropts?.headers),
      })
      return new NatsMsg(reply, publish)
    } catch (err) {
      throw toBusError(err)
    }
  }

  const gather = async (subject: string, payload?: Payload, gopts?: GatherOptions): Promise<BusMsg[]> => {
    ensureOpen(false)
    assertSubject(subject, false)
    const data = encodePayload(payload, maxPayload())
    const replies: BusMsg[] = []
    try {
      const maxWait = gopts?.maxWaitMs ?? 1000
      const headers = toNatsHeaders(gopts?.headers)
      const it = await nc.requestMany(
        subject,
        data,
        gopts?.expect === undefined
          ? { strategy: "stall", stall: gopts?.stallMs ?? 50, maxWait, headers }
          : { strategy: "count", maxMessages: gopts.expect, maxWait, headers },
      )
      for await (const m of it) {
        // A 503 status message is the server saying nobody listens.
        if (m.data.length === 0 && m.headers?.code === 503) break
        replies.push(new NatsMsg(m, publish))
      }
    } catch (err) {
      const e = toBusError(err)
      if (!(e instanceof BusError && (e.code === "NO_RESPONDERS" || e.code === "TIMEOUT"))) throw e
    }
    return replies
  }

  const drain = (): Promise<void> => {
    drained ??= (async () => {
      closing = true
      await Promise.all([...live].map((s) => s.drain()))
      if (!nc.isClosed()) await nc.drain().catch(() => nc.close())
    })()
    return drained
  }

  return {
    kind: "nats",
    publish,
    subscribe,
    request,
    gather,
    flush: async () => {
      ensureOpen(true)
      await nc.flush().catch((err: unknown) => {
        throw toBusError(err)
      })
    },
    status: () => {
      const server = nc.getServer()
      return { kind: "nats", connected: connected && !nc.isClosed(), ...(server ? { server } : {}) }
    },
    drain,
  }
}

class NatsMsg implements BusMsg {
  private hdrs: Readonly<Record<string, string>> | undefined | null = null

  constructor(
    private readonly m: Msg,
    private readonly publish: BusClient["publish"],
  ) {}

  get subject(): string {
    return this.m.subject
  }

  get data(): Uint8Array {
    return this.m.data
  }

  get reply(): string | undefined {
    return this.m.reply || undefined
  }

  get headers(): Readonly<Record<string, string>> | undefined {
    if (this.hdrs === null) this.hdrs = fromNatsHeaders(this.m.headers)
    return this.hdrs
  }

  string(): string {
    return decodeString(this.m.data)
  }

  json<T = unknown>(): T {
    return decodeJson<T>(this.m.data)
  }

  respond(payload?: Payload, opts?: { headers?: Record<string, string> }): boolean {
    const reply = this.reply
    if (reply === undefined) return false
    this.publish(reply, payload, opts)
    return true
  }
}

function toNatsHeaders(record: Record<string, string> | undefined): MsgHdrs | undefined {
  if (!record) return undefined
  const h = natsHeaders()
  for (const [k, v] of Object.entries(record)) h.set(k, v)
  return h
}

function fromNatsHeaders(h: MsgHdrs | undefined): Readonly<Record<string, string>> | undefined {
  if (!h) return undefined
  const out: Record<string, string> = {}
  // A repeated header collapses to its first value, as MsgHdrs.get() would return.
  for (const [k, values] of h) if (values[0] !== undefined) out[k] = values[0]
  return Object.keys(out).length > 0 ? Object.freeze(out) : undefined
}

function mapErrors<T>(fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    throw toBusError(err)
  }
}

function toBusError(err: unknown): unknown {
  const as = (code: BusErrorCode): BusError => {
    const e = new BusError(code, err instanceof Error ? err.message : String(err))
    e.cause = err
    return e
  }
  if (err instanceof BusError) return err
  if (err instanceof ClosedConnectionError || err instanceof DrainingConnectionError) return as("CLOSED")
  if (err instanceof NoRespondersError) return as("NO_RESPONDERS")
  if (err instanceof TimeoutError) return as("TIMEOUT")
  if (err instanceof InvalidSubjectError) return as("BAD_SUBJECT")
  if (err instanceof InvalidArgumentError && err.message.includes("max_payload")) return as("MAX_PAYLOAD")
  if (err instanceof RequestError) {
    // nats.js v3 wraps the real reason of a failed request (NoRespondersError, ...) in `cause`.
    if (err.cause !== undefined) {
      const inner = toBusError(err.cause)
      if (inner instanceof BusError) return Object.assign(inner, { cause: err })
    }
    if (/connection (closed|draining)/.test(err.message)) return as("CLOSED")
  }
  return err
}
