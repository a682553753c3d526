// GET /openapi.json: the OpenAPI 3.1 description generated from the route table it is part of.
import { Effect } from "effect"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { openApiDocument } from "../openapi.js"
import { json } from "../reply.js"
import { type AnyRoute, route } from "../route.js"

/** Built once from the final table (the table includes this route). */
export function openApiRoute(table: () => ReadonlyArray<AnyRoute>): AnyRoute {
  let doc: unknown
  return route({
    method: "GET",
    path: "/openapi.json",
    auth: "public",
    summary: "This description (OpenAPI 3.1)",
    tags: ["meta"],
    handler: () =>
      Effect.map(AppConfig, (config) =>
        json((doc ??= openApiDocument(table(), { uploadLimitBytes: config.uploadLimitBytes }))),
      ),
  })
}
