// What both buses share: the subject rules, payload encoding, and the mailbox that hands one
// subscription's messages to its handler one at a time, in order.

import { BusError, type Payload } from "./bus.js"

const encoder = new TextEncoder()
const decoder = new TextDecoder()
const WHITESPACE = /\s/

/**
 * Throws BAD_SUBJECT unless `subject` is a valid publish subject (`wildcards` false) or
 * subscription subject. Stricter than nats-server, which treats `a*` as a literal token: a
 * wildcard character is only allowed as a whole token, so a typo can't silently mean a literal.
 */
export function assertSubject(subject: string, wildcards: boolean): void {
  const bad = (why: string): never => {
    throw new BusError("BAD_SUBJECT", `invalid subject ${JSON.stringify(subject)}: ${why}`)
  }
  if (typeof subject !== "string" || subject.length === 0) bad("empty")
  if (WHITESPACE.test(subject)) bad("contains whitespace")
  const tokens = subject.split(".")
  tokens.forEach((token, i) => {
    if (token.length === 0) bad("empty token")
    if (token === "*" || token === ">") {
      if (!wildcards) bad("wildcards are only allowed when subscribing")
      if (token === ">" && i !== tokens.length - 1) bad("'>' must be the last token")
    } else if (token.includes("*") || token.includes(">")) {
      bad("a wildcard must be a whole token")
    }
  })
}

export function assertQueue(queue: string | undefined): void {
  if (queue !== undefined && (queue.length === 0 || WHITESPACE.test(queue))) {
    throw new BusError("BAD_SUBJECT", `invalid queue group ${JSON.stringify(queue)}`)
  }
}

export function encodePayload(payload: Payload | undefined, maxPayload: number): Uint8Array {
  const data =
    payload === undefined
      ? new Uint8Array(0)
      : payload instanceof Uint8Array
        ? payload
        : encoder.encode(typeof payload === "string" ? payload : JSON.stringify(payload))
  if (data.byteLength > maxPayload) {
    throw new BusError("MAX_PAYLOAD", `payload of ${data.byteLength} bytes exceeds the ${maxPayload} byte limit`)
  }
  return data
}

export function decodeJson<T>(data: Uint8Array): T {
  return JSON.parse(decoder.decode(data)) as T
}

export function decodeString(data: Uint8Array): string {
  return decoder.decode(data)
}

/**
 * A subscription's message queue: one item at a time, in order, awaiting async handlers.
 * Handler failures go to `onError` so a bad message never ends the subscription. Work is
 * started and resumed from setImmediate, so delivery never runs inside the publisher's stack
 * and a handler that publishes back to itself can't starve I/O.
 */
export class Mailbox<T> {
  private items: T[] = []
  private head = 0
  private running = false
  private closed = false
  private idleWaiters: Array<() => void> = []

  constructor(
    private readonly deliver: (item: T) => void | Promise<void>,
    private readonly onError: (err: unknown, item: T) => void,
  ) {}

  push(item: T): void {
    if (this.closed) return
    this.items.push(item)
    if (!this.running) {
      this.running = true
      setImmediate(() => void this.pump())
    }
  }

  /** Drops whatever is queued; the item being handled (if any) finishes on its own. */
  close(): void {
    this.closed = true
    this.items = []
    this.head = 0
  }

  /** Resolves once the queue is empty and no handler is running (or the mailbox closed). */
  idle(): Promise<void> {
    if (!this.running) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private async pump(): Promise<void> {
    while (!this.closed && this.head < this.items.length) {
      // Bound each turn to what was queued when it began, then yield to the event loop.
      let budget = this.items.length - this.head
      while (budget-- > 0 && !this.closed && this.head < this.items.length) {
        const item = this.items[this.head] as T
        this.head++
        try {
          const pending = this.deliver(item)
          if (pending) await pending
        } catch (err) {
          this.onError(err, item)
        }
      }
      this.compact()
      if (!this.closed && this.head < this.items.length) await new Promise((r) => setImmediate(r))
    }
    this.running = false
    this.wakeIdle()
  }

  private compact(): void {
    if (this.head === this.items.length) {
      this.items = []
      this.head = 0
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters
    this.idleWaiters = []
    for (const wake of waiters) wake()
  }
}
