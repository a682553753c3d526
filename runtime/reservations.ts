// Call reservations from a runtime process, grouped: the reservations asked for while one of the
// same workspace (and terms) is being written go together in the next one (src/billing:
// reserveCalls, one transaction and one wallet lock per batch). A dial batch starts many calls in
// one event-loop turn; one reservation each would queue them all on the workspace's wallet row.

/** Reserves a batch of calls of one workspace; per call in order: the amount held, or not funded. */
export type ReserveBatch = (
  tenantId: number,
  callRefs: readonly string[],
  seconds: number,
) => Promise<ReadonlyArray<{ ok: true; reservedMinor: number } | { ok: false }>>

type Result = { ok: true; reservedMinor: number } | { ok: false }

interface Waiting {
  readonly callRef: string
  readonly resolve: (r: Result) => void
  readonly reject: (e: unknown) => void
}

/** Most calls one batch reserves; more wait for the next. */
const MAX_BATCH = 500

export class ReservationBatcher {
  private readonly queues = new Map<string, { waiting: Waiting[]; busy: boolean }>()

  constructor(private readonly reserveBatch: ReserveBatch) {}

  reserve(tenantId: number, callRef: string, seconds: number): Promise<Result> {
    const key = `${tenantId}:${seconds}`
    let q = this.queues.get(key)
    if (q === undefined) this.queues.set(key, (q = { waiting: [], busy: false }))
    const queue = q
    const p = new Promise<Result>((resolve, reject) => queue.waiting.push({ callRef, resolve, reject }))
    // The first of a burst waits a microtask turn for the rest of its dial batch.
    if (!queue.busy) {
      queue.busy = true
      queueMicrotask(() => void this.drain(key, tenantId, seconds))
    }
    return p
  }

  private async drain(key: string, tenantId: number, seconds: number): Promise<void> {
    const q = this.queues.get(key)!
    while (q.waiting.length > 0) {
      const batch = q.waiting.splice(0, MAX_BATCH)
      try {
        const results = await this.reserveBatch(
          tenantId,
          batch.map((w) => w.callRef),
          seconds,
        )
        for (const [i, w] of batch.entries()) w.resolve(results[i] ?? { ok: false })
      } catch (err) {
        for (const w of batch) w.reject(err)
      }
    }
    q.busy = false
    this.queues.delete(key)
  }
}
