// The server for bench/auth: the real `--role all` process with one handler mounted twice, at
// GET /bench/open (public) and GET /bench/keyed (jwt, scope read), so the two differ only by auth.
import { Effect } from "effect"
import { json } from "../../api/reply.js"
import { route } from "../../api/route.js"
import { serve } from "../../src/main/serve.js"
import { loadConfig } from "../../src/platform/config.js"
import { makeLogger } from "../../src/platform/Log.js"

const body = { ok: true, service: "parley", probe: "auth" }
const handler = () => Effect.succeed(json(body))

const config = loadConfig(process.env)
// As in production (src/main/main.ts): info level, one buffered line per request.
const logger = makeLogger(config, { role: "all" }, { buffered: true })
const running = await serve({
  role: "all",
  config,
  logger,
  extraRoutes: [
    route({
      method: "GET",
      path: "/bench/open",
      auth: "public",
      summary: "bench probe, no auth",
      tags: ["bench"],
      handler,
    }),
    route({
      method: "GET",
      path: "/bench/keyed",
      auth: "jwt",
      summary: "bench probe, API key or session (GET: scope read)",
      tags: ["bench"],
      handler,
    }),
  ],
})
logger.info({ role: "all", port: running.port, instance: running.instance.id }, "parley started")
logger.flush()

let stopping = false
for (const signal of ["SIGTERM", "SIGINT"] as const)
  process.on(signal, () => {
    if (stopping) process.exit(1)
    stopping = true
    running.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  })
