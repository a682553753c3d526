// Fresh shared reads: identical reads of one database that wait together share one load, and a
// reader only ever joins a load that started after it arrived, so what it gets is never older.
//
// A dashboard polls the same few lists per workspace from many tabs and scripts. Loading each
// request on its own costs a database round trip (and the planner's work on the counters) per
// request; caching the answer would need every writer (the api, each runtime process, the
// sweepers) to announce every change. Here, while one load for a key is in flight, the readers
// that arrive queue for the next one, which starts when the first ends: under load a single load
// answers a whole queue, and since it starts after each of them arrived, a change that committed
// before a request reached any process is in its answer (read-after-write across processes, with
// nothing to invalidate). Idle keys hold nothing, so a flood of distinct keys cannot grow memory
// beyond the loads in flight.
import { perDatabase } from "./per-database.js"

interface Next<T> {
  readonly load: () => Promise<T>
  readonly promise: Promise<T>
  resolve(value: T): void
  reject(err: unknown): void
}

interface Slot<T> {
  running: boolean
  next: Next<T> | undefined
}

/** One database's reads in flight, by key. */
export class SharedReads {
  private readonly slots = new Map<string, Slot<unknown>>()

  /** Keys with a load in flight (for tests and metrics). */
  get inFlight(): number {
    return this.slots.size
  }

  /**
   * The result of `load`, or of a load of the same `key` that starts after this call: `key` must
   * name everything the result depends on (workspace, filters, page).
   */
  read<T>(key: string, load: () => Promise<T>): Promise<T> {
    const slot = this.slots.get(key) as Slot<T> | undefined
    if (slot === undefined) {
      const fresh: Slot<T> = { running: true, next: undefined }
      this.slots.set(key, fresh as Slot<unknown>)
      return this.run(key, fresh, load)
    }
    // A load is running that started before we arrived: wait for the one after it.
    if (slot.next !== undefined) return slot.next.promise
    let resolve!: (v: T) => void
    let reject!: (e: unknown) => void
    const promise = new Promise<T>((res, rej) => {
      resolve = res
      reject = rej
    })
    slot.next = { load, promise, resolve, reject }
    return promise
  }

  private run<T>(key: string, slot: Slot<T>, load: () => Promise<T>): Promise<T> {
    let started: Promise<T>
    try {
      started = load()
    } catch (e) {
      started = Promise.reject(e)
    }
    const after = () => {
      const next = slot.next
      if (next === undefined) {
        this.slots.delete(key)
        return
      }
      slot.next = undefined
      this.run(key, slot, next.load).then(next.resolve, next.reject)
    }
    started.then(after, after)
    return started
  }
}

/** The shared reads of one database client (each server in a process has its own). */
export const sharedReadsOf = perDatabase(() => new SharedReads())
