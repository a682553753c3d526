// The authenticator as a scoped service: its JWT key (configured, or generated once per
// deployment), its subscription to invalidations from other processes, and the loop that
// writes API-key usage in batches (flushed once more when the process stops) through KeyUseLog.
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { Log } from "../platform/Log.js"
import { systemSecret } from "../platform/secret-store.js"
import { AUTH_INVALIDATE_SUBJECT } from "../platform/subjects.js"
import { Authenticator, type RecordKeyUses } from "./authenticator.js"
import { makeJwtKeys } from "./jwt.js"
import type { Invalidation } from "./principal.js"

export class Auth extends Context.Tag("parley/Auth")<Auth, Authenticator>() {}

/**
 * Where the authenticator's batches of API-key last uses go: the port src/keys fills
 * (KeyUseLogLive), so keys may use auth and auth never imports keys.
 */
export class KeyUseLog extends Context.Tag("parley/KeyUseLog")<KeyUseLog, RecordKeyUses>() {}

export const AuthLive: Layer.Layer<Auth, never, AppConfig | Bus | Clock | Db | Log | KeyUseLog> = Layer.scoped(
  Auth,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { sql } = yield* Db
    const bus = yield* Bus
    const clock = yield* Clock
    const log = yield* Log
    const recordKeyUses = yield* KeyUseLog
    const secret = config.jwtSecret ?? (yield* Effect.promise(() => systemSecret(sql, "jwt_hs256")))
    const auth = new Authenticator({ sql, bus, jwt: makeJwtKeys(secret), clock, config, log, recordKeyUses })

    yield* Effect.acquireRelease(
      Effect.sync(() =>
        bus.subscribe(AUTH_INVALIDATE_SUBJECT, (msg) => {
          auth.apply(msg.json<Invalidation>())
          // Acknowledge only after applying: the revoking process waits for these.
          msg.respond({ applied: true })
        }),
      ),
      (sub) => Effect.sync(() => sub.unsubscribe()),
    )

    const flush = Effect.tryPromise(() => auth.flushKeyUses()).pipe(
      Effect.catchAll((e) =>
        Effect.sync(() => log.warn({ err: e.error }, "could not record API key usage; will retry")),
      ),
    )
    yield* flush.pipe(Effect.repeat(Schedule.spaced(Duration.millis(config.keyUsageFlushMs))), Effect.forkScoped)
    yield* Effect.addFinalizer(() => flush)
    return auth
  }),
)
