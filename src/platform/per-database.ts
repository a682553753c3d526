// State kept per database client rather than per process. A deployment's process has one
// database, but a process may hold several servers (the test suites run many in one worker, each
// on its own copy of the schema, where workspace and run ids repeat): what is keyed by a workspace
// or a run id must not leak from one server's database into another's.

/** A getter of `make()`'s value for a database client: made on first use, dropped with the client. */
export function perDatabase<D extends object, T>(make: (db: D) => T): (db: D) => T {
  const values = new WeakMap<D, T>()
  return (db) => {
    let value = values.get(db)
    if (value === undefined) values.set(db, (value = make(db)))
    return value
  }
}

/**
 * A load done once per database client (a lookup whose answer never changes for the life of the
 * process): the first caller starts it (with its arguments), the others share its promise; a
 * failed load is forgotten so the next caller tries again.
 */
export function oncePerDatabase<D extends object, A extends unknown[], T>(
  load: (db: D, ...args: A) => Promise<T>,
): (db: D, ...args: A) => Promise<T> {
  const loads = new WeakMap<D, Promise<T>>()
  return (db, ...args) => {
    let loading = loads.get(db)
    if (loading === undefined) {
      loading = load(db, ...args)
      loads.set(db, loading)
      loading.catch(() => loads.delete(db))
    }
    return loading
  }
}
