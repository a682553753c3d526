// GET /healthz: this process's database and bus, whether any runtime process answers on the bus,
// and which provider implementations are configured. 503 when the database or bus is down.
import { Effect } from "effect"
import { providerStatus } from "../../src/providers/provider-status.js"
import { AppConfig } from "../../src/services/AppConfig.js"
import { Bus } from "../../src/services/Bus.js"
import { Db } from "../../src/services/Db.js"
import { Instance } from "../../src/services/Instance.js"
import { RT_PING, type RuntimePong } from "../../runtime/subjects.js"
import { json } from "../reply.js"
import { route } from "../route.js"

const CHECK_TIMEOUT_MS = 2_000

const timed = <A>(p: () => Promise<A>) =>
  Effect.tryPromise(p).pipe(
    Effect.timeout(CHECK_TIMEOUT_MS),
    Effect.map((value) => ({ ok: true as const, value })),
    Effect.catchAll((e) => Effect.succeed({ ok: false as const, error: describe(e) })),
  )

function describe(e: unknown): string {
  if (e && typeof e === "object" && "_tag" in e && e._tag === "TimeoutException") return `no answer within ${CHECK_TIMEOUT_MS} ms`
  const cause = e && typeof e === "object" && "error" in e ? (e as { error: unknown }).error : e
  return cause instanceof Error ? cause.message : String(cause)
}

export default route({
  method: "GET",
  path: "/healthz",
  auth: "public",
  summary: "Service health: database, bus, runtime processes and provider configuration",
  tags: ["health"],
  handler: () =>
    Effect.gen(function* () {
      const db = yield* Db
      const bus = yield* Bus
      const instance = yield* Instance
      const config = yield* AppConfig
      const [database, runtime] = yield* Effect.all(
        [timed(() => db.ping()), timed(() => bus.request(RT_PING, {}, { timeoutMs: 1_000 }).then((m) => m.json<RuntimePong>()))],
        { concurrency: "unbounded" },
      )
      const busStatus = bus.status()
      const healthy = database.ok && busStatus.connected
      const body = {
        status: !healthy ? "unavailable" : runtime.ok ? "ok" : "degraded",
        version: "0.3.0",
        instance: { id: instance.id, role: instance.role, started_at: instance.startedAt.toISOString() },
        checks: {
          database: database.ok
            ? { ok: true, kind: db.kind, latency_ms: Math.round(database.value * 100) / 100 }
            : { ok: false, kind: db.kind, error: database.error },
          bus: { ok: busStatus.connected, kind: busStatus.kind, ...(busStatus.server && { server: busStatus.server }) },
          runtime: runtime.ok ? { ok: true, answered_by: runtime.value.instance_id } : { ok: false, error: runtime.error },
        },
        providers: providerStatus(config),
      }
      return json(body, healthy ? 200 : 503)
    }),
})
