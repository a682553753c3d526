// GET /healthz: this process's database and bus, whether any runtime process answers on the bus,
// which provider implementations are configured and which payment mode is active. 503 when the
// database or bus is down. Failures answer stable codes; their details (error text, addresses)
// go to the log under the request id, since this endpoint is public.
import { Effect } from "effect"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { Bus } from "../../src/platform/Bus.js"
import { Db } from "../../src/platform/Db.js"
import { Instance } from "../../src/platform/Instance.js"
import { Log } from "../../src/platform/Log.js"
import { RT_PING, type RuntimePong } from "../../src/platform/subjects.js"
import { Payments } from "../../src/providers/Payments.js"
import { providerStatus } from "../../src/providers/provider-status.js"
import { json } from "../reply.js"
import { route } from "../route.js"

const CHECK_TIMEOUT_MS = 2_000

type Check<A> = { ok: true; value: A } | { ok: false; timedOut: boolean; detail: string }

const timed = <A>(p: () => Promise<A>): Effect.Effect<Check<A>> =>
  Effect.tryPromise(p).pipe(
    Effect.timeout(CHECK_TIMEOUT_MS),
    Effect.map((value): Check<A> => ({ ok: true, value })),
    Effect.catchAll((e) => Effect.succeed<Check<A>>({ ok: false, timedOut: isTimeout(e), detail: describe(e) })),
  )

const isTimeout = (e: unknown): boolean =>
  typeof e === "object" && e !== null && "_tag" in e && e._tag === "TimeoutException"

function describe(e: unknown): string {
  if (isTimeout(e)) return `no answer within ${CHECK_TIMEOUT_MS} ms`
  const cause = e && typeof e === "object" && "error" in e ? (e as { error: unknown }).error : e
  return cause instanceof Error ? cause.message : String(cause)
}

export default route({
  method: "GET",
  path: "/healthz",
  auth: "public",
  summary:
    "Service health: database, bus, runtime processes, provider configuration and payment mode. " +
    "HTTP/1.1 only: the engine answers an HTTP/1.0 request 505 HTTP Version Not Supported (a proxy or load " +
    "balancer must speak HTTP/1.1, e.g. nginx's proxy_http_version 1.1)",
  tags: ["health"],
  handler: ({ requestId }) =>
    Effect.gen(function* () {
      const db = yield* Db
      const bus = yield* Bus
      const instance = yield* Instance
      const config = yield* AppConfig
      const payments = yield* Payments
      const log = yield* Log
      const [database, runtime] = yield* Effect.all(
        [
          timed(() => db.ping()),
          timed(() => bus.request(RT_PING, {}, { timeoutMs: 1_000 }).then((m) => m.json<RuntimePong>())),
        ],
        { concurrency: "unbounded" },
      )
      const busStatus = bus.status()
      const healthy = database.ok && busStatus.connected
      if (!database.ok || !busStatus.connected || !runtime.ok)
        log.warn(
          {
            req_id: requestId,
            ...(!database.ok && { database: database.detail }),
            ...(!busStatus.connected && { bus: busStatus.server ?? busStatus.kind }),
            ...(!runtime.ok && { runtime: runtime.detail }),
          },
          "health check failed",
        )
      // The stub gateway credits wallets on an unsigned webhook: it is on only when asked for
      // (PAYMENTS=stub) and no real gateway is configured.
      const stub = config.paymentsMode === "stub" && !payments.live.gw_card && !payments.live.gw_upi
      const body = {
        status: !healthy ? "unavailable" : runtime.ok ? "ok" : "degraded",
        version: "0.3.0",
        instance: { id: instance.id, role: instance.role, started_at: instance.startedAt.toISOString() },
        checks: {
          database: database.ok
            ? { ok: true, kind: db.kind, latency_ms: Math.round(database.value * 100) / 100 }
            : { ok: false, kind: db.kind, code: database.timedOut ? "DATABASE_TIMEOUT" : "DATABASE_UNREACHABLE" },
          bus: busStatus.connected
            ? { ok: true, kind: busStatus.kind }
            : { ok: false, kind: busStatus.kind, code: "BUS_DISCONNECTED" },
          runtime: runtime.ok
            ? { ok: true, answered_by: runtime.value.instance_id }
            : { ok: false, code: runtime.timedOut ? "RUNTIME_TIMEOUT" : "RUNTIME_UNREACHABLE" },
        },
        providers: providerStatus(config),
        // Calls heard as audio: which carriers' calls stream (MEDIA_STREAMS) and how the callee is
        // recognised by the runtime that answered ("script": PocketSphinx is not installed there, and
        // only simulated callees, whose lines the stand-in is told, are understood).
        voice: {
          media_streams: config.mediaStreams,
          recognition: runtime.ok ? (runtime.value.recognition ?? null) : null,
        },
        payments: { mode: stub ? "stub" : "gateways", gw_card: payments.live.gw_card, gw_upi: payments.live.gw_upi },
      }
      return json(body, healthy ? 200 : 503)
    }),
})
