// The database: one postgres.js client, against real Postgres (DATABASE_URL) or against embedded
// PGlite served on a loopback socket, so both run the same client and the same SQL.
import { mkdirSync } from "node:fs"
import { join, resolve } from "node:path"
import { Cause, Context, Effect, Layer, Runtime } from "effect"
import postgres from "postgres"
import { AppConfig } from "./AppConfig.js"
import { instrumentDatabase } from "./db.metrics.js"
import { StartupError } from "./errors.js"
import { Log } from "./Log.js"
import {
  applyWasmTierUp,
  type EmbeddedOptions,
  hasCluster,
  initdbInChild,
  pgliteStartParams,
} from "./pglite.options.js"

export type Sql = postgres.Sql<{ bigint: number }>
/** A transaction's handle (inside `sql.begin`): functions that must run in one take this. */
export type Tx = postgres.TransactionSql<{ bigint: number }>

export interface Database {
  readonly sql: Sql
  readonly kind: "postgres" | "pglite"
  /** Round-trip time of `select 1` in ms; rejects when the database is unreachable. */
  ping(): Promise<number>
  /**
   * Hears `channel`'s notifications (each sent when its transaction commits). `onLive(true)` each
   * time listening starts or starts again after a lost connection (what was sent meanwhile is
   * lost), `onLive(false)` when it stops. Resolves to the unlisten.
   */
  listen(channel: string, onPayload: (payload: string) => void, onLive: (live: boolean) => void): Promise<Unlisten>
}

export type Unlisten = () => Promise<void>

export class Db extends Context.Tag("parley/Db")<Db, Database>() {}

/** A unique-constraint violation (SQLSTATE 23505), optionally of one named constraint. */
export const isUniqueViolation = (e: unknown, constraint?: string): boolean =>
  typeof e === "object" &&
  e !== null &&
  (e as { code?: string }).code === "23505" &&
  (constraint === undefined || (e as { constraint_name?: string }).constraint_name === constraint)

/**
 * A statement Postgres cancelled (SQLSTATE 57014): statement_timeout ran out, or an operator
 * cancelled it. The HTTP layer answers it 503 DATABASE_TIMEOUT rather than 500.
 */
export const isStatementTimeout = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { code?: unknown }).code === "57014"

/** Error codes that mean Postgres was out of reach (the statement itself was not wrong). */
const CONNECTION_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  // admin_shutdown, crash_shutdown, cannot_connect_now (a restart in progress)
  "57P01",
  "57P02",
  "57P03",
  // too_many_connections: every slot taken, as during a restart's reconnect storm
  "53300",
])

/** The connection to Postgres was lost or refused (SQLSTATE class 08, a server shutting down, a socket error). */
export const isConnectionError = (e: unknown): boolean => {
  // A query run inside an Effect rejects its runPromise with the defect wrapped in a FiberFailure.
  if (Runtime.isFiberFailure(e)) return isConnectionError(Cause.squash(e[Runtime.FiberFailureCauseId]))
  const code = typeof e === "object" && e !== null ? (e as { code?: unknown }).code : undefined
  return typeof code === "string" && (CONNECTION_ERRORS.has(code) || code.startsWith("08"))
}

/**
 * Runs `f` again, with a growing pause, while Postgres is out of reach (a restart, a failover), for
 * at most `maxMs`; any other error, or the last one, is thrown. Only for work that is idempotent:
 * a statement may have committed just before the connection dropped (docs/operations.md).
 */
export async function retryOnDisconnect<A>(
  f: () => Promise<A>,
  opts: { maxMs?: number; onRetry?: (err: unknown, attempt: number) => void } = {},
): Promise<A> {
  const deadline = Date.now() + (opts.maxMs ?? 60_000)
  for (let attempt = 1; ; attempt++) {
    try {
      return await f()
    } catch (err) {
      if (!isConnectionError(err) || Date.now() >= deadline) throw err
      opts.onRetry?.(err, attempt)
      await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** Math.min(attempt, 5))))
    }
  }
}

/** Runs a query; a database failure is a defect (500), not a domain error. */
export const query = <A>(f: (sql: Sql) => PromiseLike<A>): Effect.Effect<A, never, Db> =>
  Effect.flatMap(Db, (db) => Effect.promise(() => f(db.sql)))

// int8 (bigint) columns hold ids and minor-unit money: parse them as JS numbers, which are exact
// below 2^53 — far above any id or balance we store — and serialise directly into JSON.
const clientOptions = {
  types: {
    bigint: {
      to: 20,
      from: [20] as number[],
      serialize: (x: number) => String(x),
      parse: (x: string) => Number(x),
    },
  },
  onnotice: () => {},
  connection: { application_name: "parley" },
}

/** The same connection string, naming another database on the same server. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * A pool of `max` connections. `statementTimeoutMs` (0 or absent: none) is set on each connection
 * as it opens, so a runaway statement is cancelled by Postgres instead of holding a connection and
 * its locks. PGlite accepts the setting but does not enforce it (it has no timer to cancel with).
 */
export function connectPostgres(
  url: string,
  max: number,
  opts: { statementTimeoutMs?: number; hooks?: ConnectionHooks; idleTimeoutS?: number } = {},
): Sql {
  const connection = opts.statementTimeoutMs
    ? { ...clientOptions.connection, statement_timeout: opts.statementTimeoutMs }
    : clientOptions.connection
  return postgres(url, {
    ...clientOptions,
    ...opts.hooks,
    connection,
    max,
    // 0: never closed for being idle.
    idle_timeout: opts.idleTimeoutS ?? 60,
    connect_timeout: 10,
  }) as unknown as Sql
}

/** What the pool's connections tell: a notification on any of them, a connection closed. */
interface ConnectionHooks {
  readonly onnotify: (channel: string, payload: string) => void
  readonly onclose: () => void
}

interface Listener {
  readonly onPayload: (payload: string) => void
  readonly onLive: (live: boolean) => void
}

/**
 * LISTEN on one connection, whose close every listener hears (onLive(false)) before the LISTEN is
 * issued again on a new one (onLive(true)): what was sent in between is lost, and they know it.
 * On Postgres the connection is a client of its own; on PGlite, whose one session is the pool's one
 * connection, it is the pool, and the session's own commits notify it (hooks.onnotify).
 */
class Notifications {
  private readonly channels = new Map<string, Set<Listener>>()
  private make: (() => Sql) | undefined
  private client: Sql | undefined
  private own = false
  private relistening: NodeJS.Timeout | undefined
  private stopped = false

  readonly hooks: ConnectionHooks = {
    onnotify: (channel, payload) => {
      for (const l of this.channels.get(channel) ?? []) l.onPayload(payload)
    },
    onclose: () => {
      if (this.stopped || this.channels.size === 0) return
      for (const set of this.channels.values()) for (const l of set) l.onLive(false)
      this.relistening ??= setTimeout(() => this.relisten(), 200).unref()
    },
  }

  /** The connection to LISTEN on: the pool's. */
  attach(sql: Sql): void {
    this.make = () => sql
  }

  /** A connection of its own, made at the first LISTEN and ended by close(). */
  attachOwn(make: () => Sql): void {
    this.make = make
    this.own = true
  }

  stop(): void {
    this.stopped = true
    clearTimeout(this.relistening)
  }

  /** Stops, and ends the connection if it is its own. */
  async close(): Promise<void> {
    this.stop()
    if (this.own && this.client !== undefined) await this.client.end({ timeout: 5 }).catch(() => {})
  }

  private get conn(): Sql {
    this.client ??= this.make!()
    return this.client
  }

  async listen(channel: string, l: Listener): Promise<Unlisten> {
    let set = this.channels.get(channel)
    if (set === undefined) this.channels.set(channel, (set = new Set()))
    set.add(l)
    const sql = this.conn
    await sql`listen ${sql(channel)}`
    l.onLive(true)
    return async () => {
      set.delete(l)
      l.onLive(false)
      if (set.size > 0) return
      this.channels.delete(channel)
      const sql = this.conn
      if (!this.stopped) await sql`unlisten ${sql(channel)}`.catch(() => {})
    }
  }

  private relisten(): void {
    this.relistening = undefined
    if (this.stopped) return
    const sql = this.conn
    for (const [channel, set] of this.channels)
      sql`listen ${sql(channel)}`.then(
        () => {
          for (const l of set) l.onLive(true)
        },
        () => {
          this.relistening ??= setTimeout(() => this.relisten(), 1_000).unref()
        },
      )
  }
}

export interface EmbeddedPostgres {
  readonly url: string
  close(): Promise<void>
}

/**
 * Starts PGlite in `dir` and serves it on 127.0.0.1 at a free port. PGlite is one session:
 * the socket server takes one connection, so the client must use a pool of one (two
 * connections would interleave their transactions in that single session). A new `dir` gets its
 * cluster from a child process first (see initdbInChild), and Postgres starts with the memory
 * settings of `opts` (see pglite.options.ts).
 */
export async function startEmbeddedPostgres(dir: string, opts: EmbeddedOptions = {}): Promise<EmbeddedPostgres> {
  mkdirSync(dir, { recursive: true })
  if (!hasCluster(dir)) await initdbInChild(dir)
  applyWasmTierUp(opts.wasmTierUp ?? "hot")
  const [{ PGlite }, { PGLiteSocketServer }] = await Promise.all([
    import("@electric-sql/pglite"),
    import("@electric-sql/pglite-socket"),
  ])
  const db = await PGlite.create(dir, { startParams: pgliteStartParams(PGlite.defaultStartParams, opts) })
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 1 })
  await server.start()
  const port = Number(server.getServerConn().split(":").pop())
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    close: async () => {
      await server.stop()
      await db.close()
    },
  }
}

/** The URL without its password, for messages and logs. */
export function redact(url: string): string {
  try {
    const u = new URL(url)
    if (u.password !== "") u.password = "***"
    return u.toString()
  } catch {
    return "(unparseable URL)"
  }
}

export const DbLive: Layer.Layer<Db, never, AppConfig | Log> = Layer.scoped(
  Db,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const log = yield* Log
    let kind: Database["kind"] = "postgres"
    let url = config.databaseUrl
    let max = config.dbPoolMax
    let embeddedNotifications: Notifications | undefined
    if (url === undefined) {
      const dir = resolve(join(config.dataDir, "pglite"))
      const embedded = yield* Effect.acquireRelease(
        Effect.promise(() => startEmbeddedPostgres(dir, config.pglite)),
        (pg) => Effect.promise(() => pg.close()),
      )
      log.info({ dir }, "embedded database (PGlite) started")
      kind = "pglite"
      url = embedded.url
      max = 1
      embeddedNotifications = new Notifications()
    }
    const notifications = embeddedNotifications
    const sql = yield* Effect.acquireRelease(
      Effect.sync(() =>
        connectPostgres(url, max, { statementTimeoutMs: config.dbStatementTimeoutMs, hooks: notifications?.hooks }),
      ),
      (s) =>
        Effect.promise(() => {
          notifications?.stop()
          return s.end({ timeout: 5 })
        }),
    )
    notifications?.attach(sql)
    // On Postgres, a connection of its own that never idles out (made at the first LISTEN).
    let listener: Notifications
    if (notifications !== undefined) listener = notifications
    else {
      const own = new Notifications()
      const target = url
      listener = own
      yield* Effect.acquireRelease(
        Effect.sync(() => own.attachOwn(() => connectPostgres(target, 1, { hooks: own.hooks, idleTimeoutS: 0 }))),
        () => Effect.promise(() => own.close()),
      )
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => instrumentDatabase(sql, max)),
      (untrack) => Effect.sync(untrack),
    )
    // Fail start-up here, naming the database, rather than on the first request.
    yield* Effect.tryPromise({
      try: () => sql`select 1`,
      catch: (e) => new StartupError(`could not reach the database at ${redact(url)}: ${(e as Error).message}`),
    }).pipe(Effect.orDie)
    return {
      sql,
      kind,
      ping: async () => {
        const t0 = performance.now()
        await sql`select 1`
        return performance.now() - t0
      },
      listen: (channel, onPayload, onLive) => listener.listen(channel, { onPayload, onLive }),
    }
  }),
)
