// Starting and stopping one Parley process in a role: build the services, then the runtime host
// and/or the HTTP server; stop them in reverse order so nothing in flight loses its database or bus.
import { Effect, ManagedRuntime } from "effect"
import type { Logger } from "pino"
import type { AnyRoute } from "../../api/route.js"
import { routeTable } from "../../api/routes/index.js"
import { type ApiServer, startApiServer } from "../../api/server.js"
import { loadUws } from "../../api/uws.js"
import { type RuntimeHost, startRuntimeHost } from "../../runtime/host.js"
import { ApprovalStreams } from "../approvals/ApprovalStreams.js"
import type { Config } from "../platform/config.js"
import { StartupError } from "../platform/errors.js"
import { collectAfterStartup } from "../platform/heap.js"
import { Instance, type ProcessInstance, type Role } from "../platform/Instance.js"
import { type MetricsServer, startMetricsServer } from "../platform/metrics-server.js"
import { TurnStreams } from "../turns/TurnStreams.js"
import { type AppServices, appLayer } from "./app.layer.js"

export interface Running {
  readonly instance: ProcessInstance
  /** The HTTP port, when this process serves HTTP. */
  readonly port: number | undefined
  readonly runtime: ManagedRuntime.ManagedRuntime<AppServices, never>
  stop(): Promise<void>
}

export async function serve(opts: {
  role: Role
  config: Config
  logger: Logger
  /** Extra routes mounted beside the product's (tests use it for probes). */
  extraRoutes?: ReadonlyArray<AnyRoute>
}): Promise<Running> {
  const { role, config, logger } = opts
  if (role !== "all" && (config.databaseUrl === undefined || config.natsUrl === undefined))
    throw new StartupError(
      `--role ${role} needs DATABASE_URL and NATS_URL: the embedded database and bus live inside one process, ` +
        `so separate api and runtime processes must share a real Postgres and NATS (or run --role all).`,
    )
  if (role !== "runtime") loadUws()

  const instance = Instance.make(role)
  const runtime = ManagedRuntime.make(appLayer({ config, logger, instance }))
  let host: RuntimeHost | undefined
  let api: ApiServer | undefined
  let metrics: MetricsServer | undefined
  try {
    await runtime.runtime()
    if (config.metricsPort !== undefined)
      metrics = await startMetricsServer({
        host: config.host,
        port: config.metricsPort,
        token: config.metricsToken,
        log: logger,
      })
    if (role !== "api") host = await runtime.runPromise(startRuntimeHost)
    if (role !== "runtime")
      api = await startApiServer({ config, log: logger, runtime, routes: routeTable(opts.extraRoutes) })
    if (api !== undefined) host?.apiListening(api.port)
  } catch (e) {
    // Tidying up a start that failed: `e`, rethrown below, is what the caller needs to see.
    await host?.stop().catch(() => {})
    await metrics?.close()
    await runtime.dispose().catch(() => {})
    throw e
  }
  // Start-up's garbage is collected once the process settles, so an idle process stays small.
  collectAfterStartup()

  let stopping: Promise<void> | undefined
  return {
    instance,
    port: api?.port,
    runtime,
    stop: () =>
      (stopping ??= (async () => {
        // Turn- and approval-stream watchers are told to reconnect (to another api process) as the
        // listener closes; the api's requests in flight and the runtime's calls finish side by side.
        if (api !== undefined) {
          const [turns, approvals] = runtime.runSync(Effect.all([TurnStreams, ApprovalStreams]))
          turns.goodbye()
          approvals.goodbye()
        }
        await Promise.all([api?.shutdown(), host?.stop()])
        await metrics?.close()
        await runtime.dispose()
        logger.info("stopped")
      })()),
  }
}
