// GET /metrics on the public port: Prometheus text for this process, to a bearer METRICS_TOKEN
// only; without METRICS_TOKEN the page is not served here (404). A private listener on
// METRICS_PORT serves the same text (src/platform/metrics-server.ts).
import { Effect } from "effect"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { NotFound, Unauthenticated } from "../../src/platform/errors.js"
import { METRICS_CONTENT_TYPE, renderMetrics } from "../../src/platform/metrics.js"
import { bearerMatches } from "../../src/platform/metrics-server.js"
import { bytes } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/metrics",
  auth: "public",
  summary: "Prometheus metrics of the answering process (bearer METRICS_TOKEN; 404 when it is unset)",
  tags: ["health"],
  responses: {
    200: { description: "Prometheus text exposition format 0.0.4", contentType: "text/plain" },
    401: { description: "UNAUTHENTICATED: no bearer token, or not METRICS_TOKEN" },
    404: { description: "NOT_FOUND: METRICS_TOKEN is not set, so metrics are not served on this port" },
  },
  handler: ({ headers }) =>
    Effect.gen(function* () {
      const { metricsToken } = yield* AppConfig
      if (metricsToken === undefined) return yield* Effect.fail(new NotFound({ message: "no route for GET /metrics" }))
      if (!bearerMatches(metricsToken, headers["authorization"]))
        return yield* Effect.fail(new Unauthenticated({ message: "metrics need the bearer METRICS_TOKEN" }))
      const text = yield* Effect.promise(renderMetrics)
      return bytes(METRICS_CONTENT_TYPE, text, 200, { "Cache-Control": "no-store" })
    }),
})
