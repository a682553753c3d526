// GET /kb/export and POST /kb/import: the workspace's rules as a CSV or JSON file, and back. The
// import is strict and all-or-nothing; the file is the request body itself (up to the upload limit).
import { Effect } from "effect"
import { z } from "zod"
import { requirePermission } from "../../src/auth/authorize.js"
import { actorOf } from "../../src/auth/principal.js"
import { IMPORT_FORMATS } from "../../src/kb/rules.import.js"
import { exportRules, IMPORT_MODES, importRules } from "../../src/kb/rules.service.js"
import { bytes, json } from "../reply.js"
import { route } from "../route.js"
import { QueryBool } from "../schemas.js"
import { callerOf } from "../session.js"

const Format = z.enum(IMPORT_FORMATS, { error: `must be one of ${IMPORT_FORMATS.join(", ")}` })

export const kbExport = route({
  method: "GET",
  path: "/kb/export",
  auth: "jwt",
  summary: "Download the rules as a file POST /kb/import takes back (format csv|json, include_archived)",
  tags: ["kb"],
  query: z.object({ format: Format.optional(), include_archived: QueryBool.optional() }),
  responses: {
    200: {
      description:
        'An attachment. CSV columns: bucket,title,body,trigger_phrases (joined with " | "),trigger_category,' +
        "workflow_id,priority,status; a cell starting with = + - @ (or tab, CR) gets one leading '. " +
        "JSON: {rules: [{bucket, title, body, trigger, workflow_id, priority, status}]}",
      contentType: "text/csv",
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const file = yield* exportRules(caller.tenantId, query.format ?? "csv", query.include_archived ?? false)
      return bytes(file.contentType, file.body, 200, {
        "Content-Disposition": `attachment; filename="${file.filename}"`,
      })
    }),
})

export const kbImport = route({
  method: "POST",
  path: "/kb/import",
  auth: "jwt",
  summary: "Import rules from the CSV or JSON file sent as the body (format, mode merge|replace, dry_run)",
  tags: ["kb"],
  query: z.object({
    format: Format.optional(),
    mode: z.enum(IMPORT_MODES, { error: `must be one of ${IMPORT_MODES.join(", ")}` }).optional(),
    dry_run: QueryBool.optional(),
  }),
  body: { raw: true, limit: "upload" },
  responses: {
    200: {
      description:
        "{created, archived}; with dry_run=true {would_create, would_archive, errors: [{row, field, message}]} " +
        "and nothing written",
    },
    422: {
      description:
        "IMPORT_INVALID with errors [{row, field, message}] (CSV rows by file line, the header is 1; JSON by " +
        "1-based index); nothing written",
    },
  },
  handler: ({ principal, query, rawBody }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      // Replacing archives every rule the file leaves out: an admin's, as DELETE is (a dry run only reads).
      if (query.mode === "replace" && query.dry_run !== true)
        yield* requirePermission(caller, "admin", "an import with mode=replace (it archives the rules it leaves out)")
      return json(
        yield* importRules(
          caller.tenantId,
          { format: query.format ?? "csv", raw: rawBody },
          { mode: query.mode ?? "merge", dryRun: query.dry_run ?? false, actor: actorOf(principal!) },
        ),
      )
    }),
})
