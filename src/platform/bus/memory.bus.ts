// The in-process bus: NATS subject semantics (wildcards, queue groups, request/reply) without a
// server, for single-process deployments and tests.

import { randomBytes } from "node:crypto"
import {
  type BusClient,
  BusError,
  type BusMsg,
  type BusSubscription,
  DEFAULT_MAX_PAYLOAD,
  type GatherOptions,
  type Payload,
  type PublishOptions,
  type RequestOptions,
  type SubscribeOptions,
} from "./bus.js"
import { busOut } from "./bus.metrics.js"
import { assertQueue, assertSubject, decodeJson, decodeString, encodePayload, Mailbox } from "./bus.shared.js"

const DEFAULT_TIMEOUT_MS = 5000
const DEFAULT_STALL_MS = 50
const DEFAULT_GATHER_MS = 1000
const MATCH_CACHE_LIMIT = 10_000

export interface MemoryBusOptions {
  readonly maxPayload?: number
  /** Called when a handler throws or rejects; the subscription carries on regardless. */
  readonly onError?: (err: unknown, msg: BusMsg) => void
}

interface MemorySub {
  readonly tokens: readonly string[]
  readonly queue: string | undefined
  readonly mailbox: Mailbox<BusMsg>
  drained?: Promise<void>
}

interface TrieNode {
  readonly children: Map<string, TrieNode>
  readonly subs: Set<MemorySub>
}

/** The subscriptions one concrete subject reaches: all plain ones, one per queue group. */
interface Route {
  readonly plain: readonly MemorySub[]
  readonly groups: ReadonlyArray<{ readonly members: readonly MemorySub[]; next: number }>
}

const newNode = (): TrieNode => ({ children: new Map(), subs: new Set() })

export function makeMemoryBus(opts: MemoryBusOptions = {}): BusClient {
  const maxPayload = opts.maxPayload ?? DEFAULT_MAX_PAYLOAD
  const onError = opts.onError ?? (() => {})
  const root = newNode()
  const subs = new Set<MemorySub>()
  // Routes are recomputed lazily and dropped wholesale on any subscription change: the hot path
  // (many publishes to a stable set of subjects) then costs one Map lookup per message.
  const routes = new Map<string, Route>()
  // Requests are resolved straight from publish, keeping reply inboxes out of the trie so that
  // the request rate doesn't keep invalidating the route cache.
  const pending = new Map<string, { resolve(msg: BusMsg): void; reject(err: BusError): void }>()
  const inboxPrefix = `_INBOX.${randomBytes(8).toString("hex")}`
  let inboxSeq = 0
  let state: "open" | "draining" | "closed" = "open"
  let drained: Promise<void> | undefined

  const ensureOpen = (allowDraining: boolean): void => {
    if (state === "closed" || (state === "draining" && !allowDraining)) throw new BusError("CLOSED", "bus is closed")
  }

  const addSub = (sub: MemorySub): void => {
    let node = root
    for (const token of sub.tokens) {
      let child = node.children.get(token)
      if (!child) node.children.set(token, (child = newNode()))
      node = child
    }
    node.subs.add(sub)
    subs.add(sub)
    routes.clear()
  }

  const removeSub = (sub: MemorySub): void => {
    if (!subs.delete(sub)) return
    const path: TrieNode[] = [root]
    for (const token of sub.tokens) {
      const child = path[path.length - 1]?.children.get(token)
      if (!child) return
      path.push(child)
    }
    path[path.length - 1]?.subs.delete(sub)
    // Prune now-empty branches so per-call subjects don't leave a growing trie behind.
    for (let i = sub.tokens.length; i > 0; i--) {
      const node = path[i] as TrieNode
      if (node.subs.size > 0 || node.children.size > 0) break
      path[i - 1]?.children.delete(sub.tokens[i - 1] as string)
    }
    routes.clear()
  }

  const collect = (node: TrieNode, tokens: readonly string[], i: number, out: MemorySub[]): void => {
    if (i === tokens.length) {
      for (const s of node.subs) out.push(s)
      return
    }
    const rest = node.children.get(">")
    if (rest) for (const s of rest.subs) out.push(s)
    const literal = node.children.get(tokens[i] as string)
    if (literal) collect(literal, tokens, i + 1, out)
    const star = node.children.get("*")
    if (star) collect(star, tokens, i + 1, out)
  }

  const route = (subject: string): Route => {
    const cached = routes.get(subject)
    if (cached) return cached
    const matched: MemorySub[] = []
    collect(root, subject.split("."), 0, matched)
    const plain: MemorySub[] = []
    const groups = new Map<string, MemorySub[]>()
    for (const s of matched) {
      if (s.queue === undefined) {
        plain.push(s)
        continue
      }
      const members = groups.get(s.queue)
      if (members) members.push(s)
      else groups.set(s.queue, [s])
    }
    const built: Route = { plain, groups: [...groups.values()].map((members) => ({ members, next: 0 })) }
    if (routes.size >= MATCH_CACHE_LIMIT) routes.delete(routes.keys().next().value as string)
    routes.set(subject, built)
    return built
  }

  const drainSub = (sub: MemorySub): Promise<void> => {
    removeSub(sub)
    sub.drained ??= sub.mailbox.idle().then(() => sub.mailbox.close())
    return sub.drained
  }

  const publishMsg = (
    subject: string,
    payload: Payload | undefined,
    headers: PublishOptions["headers"],
    reply: string | undefined,
  ): void => {
    ensureOpen(true)
    assertSubject(subject, false)
    const msg = new MemoryMsg(subject, encodePayload(payload, maxPayload), headers, reply, publish)
    busOut.inc()
    const r = route(subject)
    for (const s of r.plain) s.mailbox.push(msg)
    for (const g of r.groups) {
      g.members[g.next++ % g.members.length]?.mailbox.push(msg)
    }
    pending.get(subject)?.resolve(msg)
  }

  const publish = (subject: string, payload?: Payload, opts?: PublishOptions): void =>
    publishMsg(subject, payload, opts?.headers, undefined)

  const subscribe = (
    subject: string,
    handler: (msg: BusMsg) => void | Promise<void>,
    opts?: SubscribeOptions,
  ): BusSubscription => {
    ensureOpen(false)
    assertSubject(subject, true)
    assertQueue(opts?.queue)
    const sub: MemorySub = {
      tokens: subject.split("."),
      queue: opts?.queue,
      mailbox: new Mailbox<BusMsg>(handler, onError),
    }
    addSub(sub)
    return {
      subject,
      unsubscribe: () => {
        removeSub(sub)
        sub.mailbox.close()
      },
      drain: () => drainSub(sub),
    }
  }

  const request = async (subject: string, payload?: Payload, opts?: RequestOptions): Promise<BusMsg> => {
    ensureOpen(false)
    assertSubject(subject, false)
    const data = encodePayload(payload, maxPayload)
    const r = route(subject)
    if (r.plain.length === 0 && r.groups.length === 0) {
      throw new BusError("NO_RESPONDERS", `no responders for ${subject}`)
    }
    const inbox = `${inboxPrefix}${(inboxSeq++).toString(36)}`
    const timeoutMs = opts?.timeoutMs ?? DEFAULT_TIMEOUT_MS
    return new Promise<BusMsg>((resolve, reject) => {
      const settle = (): void => {
        clearTimeout(timer)
        pending.delete(inbox)
      }
      const timer = setTimeout(() => {
        settle()
        reject(new BusError("TIMEOUT", `no reply on ${subject} within ${timeoutMs} ms`))
      }, timeoutMs)
      pending.set(inbox, {
        resolve: (msg) => {
          settle()
          resolve(msg)
        },
        reject: (err) => {
          settle()
          reject(err)
        },
      })
      publishMsg(subject, data, opts?.headers, inbox)
    })
  }

  const gather = (subject: string, payload?: Payload, opts?: GatherOptions): Promise<BusMsg[]> => {
    ensureOpen(false)
    assertSubject(subject, false)
    const data = encodePayload(payload, maxPayload)
    const r = route(subject)
    if (r.plain.length === 0 && r.groups.length === 0) return Promise.resolve([])
    const inbox = `${inboxPrefix}${(inboxSeq++).toString(36)}`
    const stallMs = opts?.stallMs ?? DEFAULT_STALL_MS
    return new Promise<BusMsg[]>((resolve) => {
      const replies: BusMsg[] = []
      let stall: NodeJS.Timeout | undefined
      const finish = (): void => {
        clearTimeout(maxWait)
        clearTimeout(stall)
        pending.delete(inbox)
        resolve(replies)
      }
      const maxWait = setTimeout(finish, opts?.maxWaitMs ?? DEFAULT_GATHER_MS)
      pending.set(inbox, {
        resolve: (msg) => {
          replies.push(msg)
          clearTimeout(stall)
          if (opts?.expect !== undefined) {
            if (replies.length >= opts.expect) finish()
          } else stall = setTimeout(finish, stallMs)
        },
        reject: finish,
      })
      publishMsg(subject, data, opts?.headers, inbox)
    })
  }

  const drain = (): Promise<void> => {
    drained ??= (async () => {
      // Handlers may still publish and respond while their subscriptions drain; only new
      // subscriptions and requests are refused.
      state = "draining"
      await Promise.all([...subs].map(drainSub))
      state = "closed"
      for (const p of [...pending.values()]) p.reject(new BusError("CLOSED", "bus closed before the reply arrived"))
    })()
    return drained
  }

  return {
    kind: "memory",
    publish,
    subscribe,
    request,
    gather,
    flush: async () => ensureOpen(true),
    status: () => ({ kind: "memory", connected: state !== "closed" }),
    drain,
  }
}

class MemoryMsg implements BusMsg {
  readonly headers: Readonly<Record<string, string>> | undefined

  constructor(
    readonly subject: string,
    readonly data: Uint8Array,
    headers: Record<string, string> | undefined,
    readonly reply: string | undefined,
    private readonly publish: BusClient["publish"],
  ) {
    // Copied so a publisher reusing its headers object can't rewrite delivered messages.
    this.headers = headers && Object.freeze({ ...headers })
  }

  string(): string {
    return decodeString(this.data)
  }

  json<T = unknown>(): T {
    return decodeJson<T>(this.data)
  }

  respond(payload?: Payload, opts?: { headers?: Record<string, string> }): boolean {
    if (this.reply === undefined) return false
    this.publish(this.reply, payload, opts)
    return true
  }
}
