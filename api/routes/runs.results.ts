// GET /api/runs/{run_id}/results: one row per target of the run (phone, name, attempts, final
// outcome, talk seconds, cost, the analysis and each extracted field), as JSON cursor pages or as
// one CSV file streamed at the pace the client reads it (`?format=csv` or `Accept: text/csv`).
import { Effect } from "effect"
import { z } from "zod"
import { resultsCsv, resultsPage } from "../../src/results/results.service.js"
import { json, stream } from "../reply.js"
import { route } from "../route.js"
import { Id, PageCursor, PageLimit } from "../schemas.js"
import { callerOf } from "../session.js"

const FORMATS = ["json", "csv"] as const

/** `format` wins; else an Accept naming text/csv (and not ruling it out with q=0) asks for CSV. */
export const wantsCsv = (format: (typeof FORMATS)[number] | undefined, accept: string | undefined): boolean => {
  if (format !== undefined) return format === "csv"
  return (accept ?? "").split(",").some((part) => {
    const [type, ...params] = part.split(";").map((s) => s.trim().toLowerCase())
    return type === "text/csv" && !params.some((p) => /^q=0(\.0*)?$/.test(p))
  })
}

export const ResultsBody = z.object({
  run_id: z.number().int(),
  workflow_id: z.number().int(),
  run_status: z.string(),
  currency: z.enum(["INR", "USD"]),
  fields: z.array(z.object({ name: z.string(), type: z.string() })).describe("the run's rule book's analysis fields"),
  results: z.array(
    z.object({
      target_id: z.number().int(),
      phone: z.string(),
      name: z.string().nullable(),
      status: z.enum(["queued", "waiting", "dialing", "done", "skipped"]),
      outcome: z.string().nullable().describe("the final outcome, once the target is done or skipped"),
      attempts: z.number().int(),
      talk_seconds: z.number().int().describe("over every attempt"),
      cost_minor: z.number().int().describe("the target's calls and their analyses"),
      analysis_status: z.enum(["pending", "done", "failed"]).nullable(),
      summary: z.string().nullable(),
      goal_met: z.boolean().nullable(),
      sentiment: z.enum(["positive", "neutral", "negative"]).nullable(),
      callback_at: z.string().nullable(),
      agreed_value_minor: z.number().int().nullable().describe("the concession a human approved, at its amount"),
      decision_effect: z
        .string()
        .nullable()
        .describe(
          "what a decision made after the call did to this result (outcome agreed_after_call, denied_after_call or " +
            "escalated_after_call where the call ended owing it: pending_approval), as POST decide said it",
        ),
      call_id: z
        .number()
        .int()
        .nullable()
        .describe("the target's latest call (GET /api/calls/{id}: transcript, analysis); null before the first dial"),
      arm: z
        .string()
        .nullable()
        .describe("the experiment arm the target's calls were placed in (its latest call's); null outside one"),
      fields: z.record(z.string(), z.unknown()).describe("every field of `fields`, null where the call did not say"),
    }),
  ),
  next_cursor: z.string().nullable(),
})

export default route({
  method: "GET",
  path: "/api/runs/{run_id}/results",
  auth: "jwt",
  summary:
    "A run's results, one row per target in target order: JSON pages (limit 1–200, default 50; cursor = " +
    "next_cursor) or, with format=csv or Accept: text/csv, the whole run as one streamed CSV file",
  tags: ["runs"],
  params: z.object({ run_id: Id }),
  query: z.object({
    format: z.enum(FORMATS, { error: `must be one of ${FORMATS.join(", ")}` }).optional(),
    limit: PageLimit,
    cursor: PageCursor.optional(),
  }),
  responses: {
    200: {
      description:
        "JSON: a page of results, in target order. CSV (attachment run-<id>-results.csv; limit and cursor do not " +
        "apply): a header row target_id,phone,name,status,outcome,attempts,talk_seconds,cost_minor,currency," +
        "analysis_status,summary,goal_met,sentiment,callback_at,agreed_value_minor, then one column per extracted " +
        "field, named as the field unless that name is taken (a fixed column, or another field's own name): then " +
        "field_<name>, prefixed again until unique; a cell whose first character other than whitespace is = + - @ " +
        "(or that starts with a tab or CR) and that is not a plain number gets one leading '",
      schema: ResultsBody,
      alternatives: [{ contentType: "text/csv" }],
    },
    429: {
      description:
        "RATE_LIMITED with Retry-After: 5 (CSV only): the workspace already has 2 CSV exports streaming from " +
        "this server; JSON pages are not limited",
    },
  },
  handler: ({ principal, params, query, headers }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      if (!wantsCsv(query.format, headers["accept"]))
        return json(yield* resultsPage(c.tenantId, params.run_id, { limit: query.limit, after: query.cursor }))
      const file = yield* resultsCsv(c.tenantId, params.run_id)
      return stream("text/csv; charset=utf-8", file.write, 200, {
        "Content-Disposition": `attachment; filename="${file.filename}"`,
        "Cache-Control": "private, no-store",
      })
    }),
})
