// /data/sources: the workspace's data sources (an uploaded CSV, a URL, the connected shop), their
// rows a page at a time, and asking for a fresh fetch. Another workspace's source is 404.
import { Effect } from "effect"
import { z } from "zod"
import {
  createCsvSource,
  createUrlSource,
  deleteSource,
  getSource,
  listSources,
  NAME_MAX,
  requestFetch,
  sourceRows,
} from "../../src/data/sources.service.js"
import { URL_MAX } from "../../src/data/url.fetch.js"
import { csvFile } from "../form.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"
import { readingUpload } from "../upload.js"

const SOURCE_DOC =
  "{source: {id, name, kind (csv, url, storefront), status (pending, fetching, ready, failed), row_count, " +
  "columns, last_fetched_at, error, url?, created_at}}"
const params = z.object({ source_id: Id })

export const dataSourcesList = route({
  method: "GET",
  path: "/data/sources",
  auth: "jwt",
  summary: "List the workspace's data sources, newest first",
  tags: ["data"],
  responses: { 200: { description: "{sources: [source…]}" } },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* listSources(caller.tenantId))
    }),
})

export const dataSourcesCreate = route({
  method: "POST",
  path: "/data/sources",
  auth: "jwt",
  summary:
    "Create a data source: a CSV file (multipart: file, name?) stored at once, or JSON {name, kind: url, url} " +
    "fetched by the runtime (a storefront source comes from connecting the shop)",
  tags: ["data"],
  body: {
    json: z.object({
      name: z
        .string({ error: "is required" })
        .trim()
        .min(1, "must not be empty")
        .max(NAME_MAX, `must be at most ${NAME_MAX} characters`),
      kind: z.literal("url", {
        error: "must be url (upload a CSV file as multipart; a storefront source comes from connecting the shop)",
      }),
      url: z.string({ error: "is required" }).trim().max(URL_MAX, `must be at most ${URL_MAX} characters`),
    }),
    multipart: "stream",
    form: {
      name: {
        kind: "text",
        required: false,
        maxLength: NAME_MAX,
        description: "The source's name (default: the file's name)",
      },
      file: csvFile("The CSV: a header row, then one row per record"),
    },
  },
  responses: {
    201: { description: `${SOURCE_DOC}: csv ready with its rows; url pending, its fetch published` },
    422: { description: "Unreadable file, too many rows or columns, or a URL that is not https or not public" },
  },
  handler: ({ principal, body, upload }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      if (upload !== undefined)
        return json(
          yield* createCsvSource(
            caller.tenantId,
            { open: () => upload.file(), fields: () => upload.fields() },
            readingUpload,
          ),
          201,
        )
      return json(yield* createUrlSource(caller.tenantId, { name: body!.name, url: body!.url }), 201)
    }),
})

export const dataSourceGet = route({
  method: "GET",
  path: "/data/sources/{source_id}",
  auth: "jwt",
  summary: "One data source",
  tags: ["data"],
  params,
  responses: { 200: { description: SOURCE_DOC } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* getSource(caller.tenantId, params.source_id))
    }),
})

export const dataSourceDelete = route({
  method: "DELETE",
  path: "/data/sources/{source_id}",
  auth: "jwt",
  permission: "admin",
  summary: "Delete a data source with its rows and chat",
  tags: ["data"],
  params,
  responses: { 200: { description: "{deleted: true, id}" } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* deleteSource(caller.tenantId, params.source_id))
    }),
})

export const dataSourceRows = route({
  method: "GET",
  path: "/data/sources/{source_id}/rows",
  auth: "jwt",
  summary: "A page of the source's rows in file order (limit 1–500, default 50; offset ≥ 0)",
  tags: ["data"],
  params,
  query: z.object({
    limit: QueryInt(1, 500).optional(),
    offset: QueryInt(0, Number.MAX_SAFE_INTEGER).optional(),
  }),
  responses: { 200: { description: "{rows: [{row_no, data}], total, limit, offset}" } },
  handler: ({ principal, params, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(
        yield* sourceRows(caller.tenantId, params.source_id, { limit: query.limit ?? 50, offset: query.offset ?? 0 }),
      )
    }),
})

export const dataSourceFetch = route({
  method: "POST",
  path: "/data/sources/{source_id}/fetch",
  auth: "jwt",
  summary:
    "Ask the source's agent to fetch new data: a runtime process fetches it, replaces the rows and says " +
    "in the chat what changed (a csv source: 409)",
  tags: ["data"],
  params,
  responses: {
    202: { description: `${SOURCE_DOC} with its new status (pending, or fetching when a fetch is running)` },
    409: { description: "A csv source has nothing to fetch (CONFLICT)" },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* requestFetch(caller.tenantId, params.source_id), 202)
    }),
})
