// cachedReads: a route marked `cached` (the lists a dashboard polls) is answered inside the uWS
// callback from the workspace's kept answer (src/platform/workspace-reads.ts) when there is one,
// else by its handler, whose answer is then kept. What drops a kept answer:
// - the database's NOTIFY on parley_reads (migration 0046) for every commit touching what the
//   lists read, whoever wrote it (api, runtime, a sweeper, a SQL function);
// - a change made through this api process, applied before its response goes out, and through
//   another api process, which does not answer its client until every api process it knows of has
//   applied it too (acknowledged over the bus, as auth invalidations are): a change made through
//   one process is in the very next read on any other.
import { randomBytes } from "node:crypto"
import type { Logger } from "pino"
import type { BusClient, BusSubscription } from "../../src/platform/bus/bus.js"
import type { Database, Unlisten } from "../../src/platform/Db.js"
import { readCache } from "../../src/platform/http.metrics.js"
import { READS_CHANGED_SUBJECT, READS_CHANNEL, READS_PEERS_SUBJECT } from "../../src/platform/subjects.js"
import { type Cached, type Ticket, WorkspaceReads } from "../../src/platform/workspace-reads.js"
import type { Reply } from "../reply.js"
import type { AnyRoute } from "../route.js"

/** How often an api process says it is there, and how long the others remember it. */
const PEER_HEARTBEAT_MS = 5_000
const PEER_FORGET_MS = 15_000
/** The longest a change waits for the other api processes' acknowledgements. */
const ACK_WAIT_MS = 1_000

const hits = readCache.child({ result: "hit" })
const misses = readCache.child({ result: "miss" })
const kept = readCache.child({ result: "kept" })

interface ChangedMsg {
  /** The workspace whose data changed; null: unknown (every workspace's answers go). */
  readonly tenant_id: number | null
  readonly from: string
}

interface PeerMsg {
  readonly id: string
  /** A process that just started asks the others to say they are there at once. */
  readonly hello?: true
  readonly bye?: true
}

/** Where a cacheable request's answer goes once its handler made it. */
export interface CacheSlot {
  readonly ticket: Ticket
  readonly key: string
}

export interface CachedReads {
  /** The kept answer for a request, or the slot its handler's answer is kept in. */
  lookup(route: AnyRoute, tenantId: number, params: Record<string, string>, query: string): Cached | CacheSlot
  /** Keeps a handler's 200 answer (bytes) in its slot, unless a change came since the slot was taken. */
  keep(slot: CacheSlot, reply: Reply): void
  /**
   * A request that may have changed the workspace's data was handled: its answers are dropped here
   * at once, and in every other api process before this resolves (undefined: none to wait for).
   */
  changed(tenantId: number): Promise<void> | undefined
  readonly reads: WorkspaceReads
  stop(): Promise<void>
}

export async function startCachedReads(db: Database, bus: BusClient, log: Logger): Promise<CachedReads> {
  const reads = new WorkspaceReads()
  const me = randomBytes(8).toString("hex")
  const peers = new Map<string, number>()
  const apply = (tenantId: number | null): void => {
    if (tenantId === null) reads.changedAll()
    else reads.changed(tenantId)
  }

  let unlisten: Unlisten | undefined
  try {
    unlisten = await db.listen(
      READS_CHANNEL,
      (payload) => {
        if (payload === "*") return reads.changedAll()
        for (const id of payload.split(",")) {
          const n = Number(id)
          if (Number.isSafeInteger(n)) reads.changed(n)
          else reads.changedAll()
        }
      },
      (live) => reads.setListening(live),
    )
  } catch (err) {
    // Without the feed nothing is kept: every read goes to the database, as before.
    log.warn({ err }, "read cache off: could not LISTEN for changes")
  }

  const subs: BusSubscription[] = [
    bus.subscribe(READS_CHANGED_SUBJECT, (msg) => {
      const m = msg.json<ChangedMsg>()
      if (m.from === me) return
      apply(m.tenant_id)
      // Acknowledged only once applied: the changing process waits for these.
      msg.respond({ applied: true })
    }),
    bus.subscribe(READS_PEERS_SUBJECT, (msg) => {
      const m = msg.json<PeerMsg>()
      if (m.id === me) return
      if (m.bye) peers.delete(m.id)
      else peers.set(m.id, performance.now())
      if (m.hello) announce(false)
    }),
  ]
  const announce = (hello: boolean): void => {
    try {
      bus.publish(READS_PEERS_SUBJECT, hello ? { id: me, hello: true } : { id: me })
    } catch (err) {
      log.warn({ err }, "read cache: could not announce this api process")
    }
  }
  announce(true)
  const heartbeat = setInterval(() => {
    announce(false)
    const now = performance.now()
    for (const [id, seen] of peers) if (now - seen > PEER_FORGET_MS) peers.delete(id)
  }, PEER_HEARTBEAT_MS).unref()

  return {
    reads,
    lookup(route, tenantId, params, query) {
      let key = route.path
      for (const k in params) key += `\u0000${params[k]}`
      key += `\u0000${query}`
      const answer = reads.get(tenantId, key)
      if (answer !== undefined) {
        hits.inc()
        return answer
      }
      misses.inc()
      return { ticket: reads.ticket(tenantId), key }
    },
    keep(slot, reply) {
      if (reply.kind !== "bytes" || reply.status !== 200) return
      const body = typeof reply.body === "string" ? Buffer.from(reply.body) : Buffer.from(reply.body)
      if (reads.offer(slot.ticket, slot.key, body, reply.contentType, reply.freshForMs)) kept.inc()
    },
    changed(tenantId) {
      apply(tenantId)
      if (peers.size === 0) return undefined
      const msg: ChangedMsg = { tenant_id: tenantId, from: me }
      // gather may throw at once (the bus closed): the change was made, so the client still hears back.
      const expect = peers.size
      return Promise.resolve()
        .then(() => bus.gather(READS_CHANGED_SUBJECT, msg, { expect, maxWaitMs: ACK_WAIT_MS }))
        .then(
          (acks) => {
            if (acks.length < expect)
              log.warn({ acks: acks.length, peers: expect }, "read cache: not every api process acknowledged a change")
          },
          (err: unknown) => log.warn({ err }, "read cache: could not tell the other api processes of a change"),
        )
    },
    async stop() {
      clearInterval(heartbeat)
      try {
        bus.publish(READS_PEERS_SUBJECT, { id: me, bye: true })
      } catch {
        // The bus is closing: the others forget this process when its heartbeats stop.
      }
      reads.setListening(false)
      for (const s of subs)
        try {
          s.unsubscribe()
        } catch {
          // Already closed with the bus.
        }
      await unlisten?.().catch(() => {})
    },
  }
}
