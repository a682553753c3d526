// GET /api/workflows/{id}/analytics: a campaign's funnel, outcomes per day, dials and connects by the
// callee's local weekday and hour, the agent's reply latency and the spend, over calls placed in a range.
import { Effect } from "effect"
import { z } from "zod"
import { workflowAnalytics } from "../../src/analytics/analytics.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

const Instant = z.string().max(40).describe("an ISO timestamp, or a date (YYYY-MM-DD, UTC)")
const Grid = z.array(z.array(z.number().int()).length(24)).length(7)

export const AnalyticsBody = z.object({
  workflow_id: z.number().int(),
  from: z.string().describe("first instant counted"),
  to: z.string().describe("first instant not counted"),
  funnel: z
    .object({
      targets: z.number().int().describe("the workflow's audience"),
      dialed: z.number().int().describe("targets with a call placed in range"),
      answered: z.number().int().describe("targets with an answered call"),
      human: z.number().int().describe("answered targets with a call not answered by a voicemail"),
      voicemail: z.number().int().describe("answered targets only ever reached on voicemail"),
      talked_30s: z.number().int().describe("targets with a human call of at least 30 s connected"),
      agreed: z
        .number()
        .int()
        .describe(
          "targets with an answered call whose outcome is agreed, agreed_with_concession or " +
            "agreed_after_call, or whose analysis says goal_met",
        ),
    })
    .describe("distinct targets at each step"),
  outcomes_over_time: z.array(
    z.object({
      day: z.string().describe("YYYY-MM-DD, UTC"),
      total: z.number().int(),
      outcomes: z.record(z.string(), z.number().int()).describe("calls by outcome; in_progress: not ended"),
    }),
  ),
  hour_of_day: z.object({
    weekdays: z.array(z.string()).describe("the rows: mon … sun"),
    dials: Grid.describe("[weekday][hour] in the callee's local time"),
    connects: Grid.describe("answered calls, same grid"),
  }),
  latency: z
    .object({
      n: z.number().int(),
      p50: z.number().nullable(),
      p90: z.number().nullable(),
      p99: z.number().nullable(),
    })
    .describe("the agent's reply latency in ms (end of the callee's speech to first audio), calls heard as audio"),
  spend_minor: z.number().int().describe("the calls' settled cost plus their analyses' charges"),
  currency: z.enum(["INR", "USD"]),
})

export default route({
  method: "GET",
  path: "/api/workflows/{id}/analytics",
  auth: "jwt",
  summary:
    "A campaign's analytics over calls placed from `from` up to `to` (ISO timestamps or dates; default the " +
    "last 30 days; at most 400 days): funnel, outcomes per UTC day, a weekday × hour grid of dials and " +
    "connects in the callee's local time, reply latency percentiles, spend",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  query: z.object({ from: Instant.optional(), to: Instant.optional() }),
  responses: {
    200: { description: "the analytics", schema: AnalyticsBody },
    404: { description: "NOT_FOUND: no such workflow in the workspace" },
    422: { description: "VALIDATION_FAILED: from or to unparsable, to before from, or more than 400 days apart" },
  },
  handler: ({ principal, params, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* workflowAnalytics(c.tenantId, params.id, query))
    }),
})
