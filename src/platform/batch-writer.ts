// The process's one way to write in groups (group commit): items submitted while a key's write is in
// flight go together in its next write, one write in flight per key. Call reservations (per
// workspace and terms), call endings, settlements and webhook attempts, and turns (per run) all use
// it; each says only how a group is written and what a failed group means for its items.
import { isConnectionError } from "./Db.js"

export interface BatchPolicy<I> {
  /** Most items one write carries; more wait for the next. */
  readonly maxBatch: number
  /**
   * When the first item of a burst starts the write: after the current task ("microtask": a dial
   * batch started in one loop turn shares it) or after this loop turn's I/O too ("immediate": every
   * request read in this turn shares it).
   */
  readonly start?: "microtask" | "immediate"
  /**
   * A group that failed for another reason than Postgres being out of reach is written again one
   * item at a time, so one bad item fails only its own caller. Off: the whole group fails.
   */
  readonly splitRefused?: boolean
  /**
   * Items kept while Postgres is out of reach: they go back to the front of the queue, in order,
   * and are written again after a growing pause; the others fail at once. Without it a lost
   * connection fails the group (callers that wait it out retry inside `write`).
   */
  readonly keep?: (item: I) => boolean
  /** Told of each failure: the group kept for another try (`kept` > 0), or the items refused. */
  readonly onFailure?: (err: unknown, info: { key: unknown; items: number; kept: number; failures: number }) => void
}

interface Waiting<I, O> {
  readonly item: I
  readonly resolve: (o: O) => void
  readonly reject: (e: unknown) => void
}

interface Queue<I, O> {
  waiting: Array<Waiting<I, O>>
  failures: number
}

const RETRY_MIN_MS = 100
const RETRY_MAX_MS = 2000
/**
 * Callers told per loop turn once their group is written: each resumes its own work (a call's next
 * step), and hundreds resumed in one go held the event loop for a tenth of a second.
 */
const RESUME_SLICE = 16
const nextTurn = () => new Promise<void>((r) => setImmediate(r))

export class BatchWriter<K, I, O> {
  private readonly queues = new Map<K, Queue<I, O>>()
  private readonly idle = new Set<() => void>()

  /** `write` answers one output per item, in order. */
  constructor(
    private readonly write: (key: K, items: readonly I[]) => Promise<readonly O[]>,
    private readonly policy: BatchPolicy<I>,
  ) {}

  submit(key: K, item: I): Promise<O> {
    let q = this.queues.get(key)
    const first = q === undefined
    if (q === undefined) this.queues.set(key, (q = { waiting: [], failures: 0 }))
    const queue = q
    const p = new Promise<O>((resolve, reject) => queue.waiting.push({ item, resolve, reject }))
    if (first) {
      if (this.policy.start === "immediate") setImmediate(() => void this.drain(key, queue))
      else queueMicrotask(() => void this.drain(key, queue))
    }
    return p
  }

  /** Items queued or being written, over all keys. */
  get pending(): number {
    let n = 0
    for (const q of this.queues.values()) n += q.waiting.length
    return n
  }

  /** Resolves once every item submitted so far is written (or failed). */
  flush(): Promise<void> {
    if (this.queues.size === 0) return Promise.resolve()
    return new Promise((resolve) => this.idle.add(resolve))
  }

  private async drain(key: K, q: Queue<I, O>): Promise<void> {
    try {
      while (q.waiting.length > 0) {
        const group = q.waiting.splice(0, this.policy.maxBatch)
        try {
          const out = await this.write(
            key,
            group.map((w) => w.item),
          )
          q.failures = 0
          for (let i = 0; i < group.length; i++) {
            group[i]!.resolve(out[i] as O)
            if ((i + 1) % RESUME_SLICE === 0 && i + 1 < group.length) await nextTurn()
          }
        } catch (err) {
          await this.failed(key, q, group, err)
        }
      }
    } finally {
      this.queues.delete(key)
      if (this.queues.size === 0) {
        for (const done of this.idle) done()
        this.idle.clear()
      }
    }
  }

  private async failed(key: K, q: Queue<I, O>, group: Array<Waiting<I, O>>, err: unknown): Promise<void> {
    const { keep, splitRefused, onFailure } = this.policy
    q.failures++
    if (isConnectionError(err) && keep !== undefined) {
      const kept = group.filter((w) => keep(w.item))
      for (const w of group) if (!keep(w.item)) w.reject(err)
      q.waiting.unshift(...kept)
      onFailure?.(err, { key, items: group.length, kept: kept.length, failures: q.failures })
      if (kept.length > 0)
        await new Promise((r) => setTimeout(r, Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** q.failures)))
      return
    }
    onFailure?.(err, { key, items: group.length, kept: 0, failures: q.failures })
    if (group.length === 1 || isConnectionError(err) || splitRefused !== true) {
      for (const w of group) w.reject(err)
      return
    }
    for (const w of group)
      await this.write(key, [w.item]).then(
        (o) => w.resolve(o[0] as O),
        (e: unknown) => w.reject(e),
      )
  }
}
