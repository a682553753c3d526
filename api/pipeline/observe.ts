// observe: counts each finished request for /metrics (route template, method, status, duration),
// beside logRequest's line. A counter and a histogram observation through cached children.
import { observeRequest } from "../../src/platform/http.metrics.js"
import type { Incoming } from "./incoming.js"
import type { Finished } from "./log-request.js"

/** Records the request that started at `started` (performance.now()); `route`: the matched template. */
export function recordRequest(ex: Finished & { readonly route?: string }, inc: Incoming, started: number): void {
  const status = ex.aborted && !ex.started ? 499 : ex.status
  observeRequest(ex.route, inc.method, status, (performance.now() - started) / 1000)
}
