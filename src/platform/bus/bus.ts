// The message bus between Parley processes: one interface, two implementations (NATS over
// @nats-io/transport-node, and an in-process bus with the same subject semantics).

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

/** What publish/request/respond accept: raw bytes, a string (UTF-8), or a JSON value. */
export type Payload = Uint8Array | string | object

export interface BusMsg {
  readonly subject: string
  readonly data: Uint8Array
  readonly headers: Readonly<Record<string, string>> | undefined
  /** The reply subject when the sender used request(); undefined otherwise. */
  readonly reply: string | undefined
  string(): string
  json<T = unknown>(): T
  /** Answers a request; false when the message carries no reply subject. */
  respond(payload?: Payload, opts?: { headers?: Record<string, string> }): boolean
}

export interface BusSubscription {
  readonly subject: string
  /** Stops delivery at once; messages not yet handed to the handler are dropped. */
  unsubscribe(): void
  /** Stops taking new messages, lets those already received reach the handler, then ends. */
  drain(): Promise<void>
}

export interface SubscribeOptions {
  /** Queue group: among subscribers sharing a queue name, each message goes to one of them. */
  readonly queue?: string
}

export interface PublishOptions {
  readonly headers?: Record<string, string>
}

export interface RequestOptions extends PublishOptions {
  /** Default 5000 ms. */
  readonly timeoutMs?: number
}

export interface GatherOptions extends PublishOptions {
  /** Stop once no further reply has come for this long (default 50 ms). */
  readonly stallMs?: number
  /** Stop at the latest after this long, replies or not (default 1000 ms). */
  readonly maxWaitMs?: number
  /** Stop as soon as this many replies came (the responders known to be there), not at a stall. */
  readonly expect?: number
}

export type BusErrorCode = "NO_RESPONDERS" | "TIMEOUT" | "BAD_SUBJECT" | "MAX_PAYLOAD" | "CLOSED"

export class BusError extends Error {
  override readonly name = "BusError"
  constructor(
    readonly code: BusErrorCode,
    message: string,
  ) {
    super(message)
  }
}

export interface BusStatus {
  readonly kind: "nats" | "memory"
  readonly connected: boolean
  readonly server?: string
}

export interface BusClient {
  readonly kind: "nats" | "memory"
  /** Fire and forget. Throws BusError BAD_SUBJECT / MAX_PAYLOAD / CLOSED synchronously. */
  publish(subject: string, payload?: Payload, opts?: PublishOptions): void
  /**
   * Handlers run one message at a time per subscription, in publish order; a handler that
   * returns a promise is awaited before the next message. A throwing handler does not end the
   * subscription.
   */
  subscribe(subject: string, handler: (msg: BusMsg) => void | Promise<void>, opts?: SubscribeOptions): BusSubscription
  /** Rejects with BusError NO_RESPONDERS at once when nobody listens, TIMEOUT after timeoutMs. */
  request(subject: string, payload?: Payload, opts?: RequestOptions): Promise<BusMsg>
  /**
   * Publishes a request and collects every reply, from every subscriber, until replies stall:
   * scatter-gather, for "tell every process and wait until each has done it". Resolves [] when
   * nobody listens.
   */
  gather(subject: string, payload?: Payload, opts?: GatherOptions): Promise<BusMsg[]>
  /** Resolves once everything published so far has reached the server (memory: the subscribers' queues). */
  flush(): Promise<void>
  status(): BusStatus
  /** Graceful close: drains every subscription, flushes, disconnects. Idempotent. */
  drain(): Promise<void>
}

/** NATS's default max_payload; the in-process bus enforces the same limit. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024
