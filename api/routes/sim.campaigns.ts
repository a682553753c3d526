// /api/sim/campaigns: simulation campaigns, a free rehearsal of a workflow against the sim personas
// on the real runtime. Create, list, read (reconciled with the run, with its forecast), and the
// commands run-batch, answer, resume and stop, which the campaign's state machine accepts or refuses.
import { Effect } from "effect"
import { z } from "zod"
import { CAMPAIGN_STATES } from "../../src/rehearsals/campaign.view.js"
import {
  answerQuestion,
  createCampaign,
  DEFAULT_BATCH_SIZE,
  DEFAULT_SIZE,
  getCampaign,
  listCampaigns,
  MAX_ACTIVE_CAMPAIGNS,
  resumeCampaign,
  runBatch,
  stopCampaign,
} from "../../src/rehearsals/campaigns.service.js"
import { DEFAULT_SIM_MIX, MAX_SEED, SIM_PERSONA_IDS } from "../../src/rehearsals/mix.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

const TAGS = ["simulation"]
/** The smallest positive time scale: below it, a real column cannot hold the value. */
const MIN_TIME_SCALE = 0.0001

/** The states and their transitions, for the OpenAPI document (the README says the same). */
export const SIM_CAMPAIGN_STATES_DOC =
  "ready: no batch in flight; run-batch releases the next batch_size callees → running. " +
  "running: a batch of simulated conversations is on the runtime; a concession, callback or escalation " +
  "held for a human → awaiting_answer; every released callee done → ready; all size done → completed. " +
  "awaiting_answer: pending_question holds a conversation; answer (or a decision on /api/approvals) → running. " +
  "stop (ready, running, awaiting_answer) → stopped: nothing more is released, conversations in flight finish " +
  "(a held one may still be answered); stop again is a no-op (200). resume (stopped only) → ready, or running " +
  "while conversations are still in flight; it counts against the active limit again. " +
  "completed: every callee has an outcome. failed: the run ended before that. Any other command → 409 " +
  "SIM_CAMPAIGN_STATE naming the campaign's state (body.state)."

const Outcomes = z.object({
  agreed: z.number().int(),
  declined: z.number().int(),
  voicemail: z.number().int(),
  no_answer: z.number().int(),
  busy: z.number().int(),
  callback: z.number().int(),
  escalated: z.number().int(),
  no_decision: z.number().int(),
  failed: z.number().int(),
  other: z.number().int(),
  approvals_asked: z.number().int(),
  approvals_approved: z.number().int(),
  approvals_denied: z.number().int(),
  approvals_expired: z.number().int(),
  approvals_pending: z.number().int(),
  by_outcome: z.record(z.string(), z.number().int()).describe("each runtime outcome string and its count"),
})

const Estimate = z.object({ value: z.number(), low: z.number(), high: z.number() })

const Forecast = z
  .object({
    basis: z.enum(["audience", "per_1000_targets"]),
    targets: z.number().int(),
    sample_size: z.number().int().describe("simulated callees with a final outcome"),
    confidence: z.literal(0.95),
    interval: z.literal("wilson"),
    rates: z.object({
      connect: Estimate.extend({ successes: z.number().int() }),
      agreement: Estimate.extend({ successes: z.number().int() }),
      approval: Estimate.extend({ successes: z.number().int() }),
    }),
    expected: z.object({ connects: Estimate, agreements: Estimate, approvals: Estimate }),
    per_hour: z.object({ attempts: z.number(), connects: Estimate, agreements: Estimate, approvals: Estimate }),
    dialing_hours: z.number(),
    minutes: Estimate,
    cost: z.object({
      currency: z.enum(["INR", "USD"]),
      rate_per_minute_minor: z.number().int(),
      minor: Estimate,
      display: z.string(),
    }),
    assumptions: z.record(z.string(), z.number()),
  })
  .nullable()
  .describe(
    "What the real run would yield, for the workflow's audience (per 1,000 targets when it has none); null " +
      "until a simulated callee has an outcome. Rates with 95% Wilson intervals; cost at the bundled rate per " +
      "minute (GET /pricing) in the workspace currency.",
  )

const Campaign = z.object({
  id: z.number().int(),
  workflow_id: z.number().int(),
  run_id: z.number().int().describe("watch its turns on GET /api/runs/{run_id}/turns/stream"),
  state: z.enum(CAMPAIGN_STATES).describe(SIM_CAMPAIGN_STATES_DOC),
  size: z.number().int(),
  batch_size: z.number().int(),
  seed: z.number().int(),
  time_scale: z.number().nullable().describe("null: the deployment's SIM_TIME_SCALE"),
  mix: z.record(z.string(), z.number()),
  progress: z.object({
    done: z.number().int(),
    released: z.number().int(),
    in_flight: z.number().int(),
    size: z.number().int(),
  }),
  outcomes: Outcomes,
  avg_talk_seconds: z.number().nullable(),
  pending_question: z
    .object({
      question_id: z.number().int(),
      action: z.enum(["concession", "callback", "escalate"]),
      value_minor: z.number().int().nullable(),
      currency: z.enum(["INR", "USD"]),
      rationale: z.string().nullable(),
      target_phone: z.string().nullable(),
      asked_at: z.string(),
      expires_at: z.string(),
    })
    .nullable(),
  pending_questions: z.number().int(),
  forecast: Forecast,
  experiment: z
    .unknown()
    .nullable()
    .describe(
      "the experiment rehearsed (experiment_id): its copy on the rehearsal's calls, as GET " +
        "/api/workflows/{id}/experiments/{experimentId} shows one, with its readout; null: none",
    ),
  turns_stream: z.string(),
  charged_minor: z.literal(0).describe("a rehearsal is free: nothing is reserved or charged from the wallet"),
  free: z.literal(true),
  failure: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  ended_at: z.string().nullable(),
})

const Mix = z
  .record(z.string(), z.number({ error: "must be a number" }).min(0, "must be at least 0").max(1_000_000))
  .superRefine((mix, ctx) => {
    for (const id of Object.keys(mix))
      if (!SIM_PERSONA_IDS.includes(id))
        ctx.addIssue({
          code: "custom",
          path: [id],
          message: `is not a sim persona (one of ${SIM_PERSONA_IDS.join(", ")})`,
        })
    if (!Object.values(mix).some((w) => w > 0))
      ctx.addIssue({ code: "custom", message: "must give at least one sim persona a positive weight" })
  })
  .describe(
    `{<sim persona id>: relative weight}, ids from GET /api/sim/personas; default ${JSON.stringify(DEFAULT_SIM_MIX)}`,
  )

const StartBody = z.object({
  workflow_id: z
    .number({ error: "must be a workflow id" })
    .int("must be a workflow id")
    .positive("must be a workflow id"),
  mix: Mix.optional(),
  size: z
    .number({ error: "must be an integer" })
    .int("must be an integer")
    .min(1, "must be at least 1")
    .max(500, "must be at most 500")
    .optional()
    .describe(`simulated callees, 1–500 (default ${DEFAULT_SIZE})`),
  batch_size: z
    .number({ error: "must be an integer" })
    .int("must be an integer")
    .min(1, "must be at least 1")
    .max(100, "must be at most 100")
    .optional()
    .describe(`callees per run-batch, 1–100 (default ${DEFAULT_BATCH_SIZE})`),
  seed: z
    .number({ error: "must be an integer" })
    .int("must be an integer")
    .min(0, "must be at least 0")
    .max(MAX_SEED, `must be at most ${MAX_SEED}`)
    .optional()
    .describe("the same seed, size and mix draw the same callees (default: random, returned)"),
  experiment_id: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("rehearse one of the workflow's experiments: its arms and seed deal the simulated callees"),
  time_scale: z
    .number({ error: "must be a number" })
    .min(0, "must be at least 0")
    .max(10, "must be at most 10")
    // Stored as a real: a positive value below its range (1e-173) would fail the insert.
    .refine((v) => v === 0 || v >= MIN_TIME_SCALE, `must be 0 or at least ${MIN_TIME_SCALE}`)
    .optional()
    .describe("multiplies the sim carrier's ring and talk times (default: the deployment's SIM_TIME_SCALE)"),
})

const Params = z.object({ campaign_id: Id })

const campaignResponse = (status: number, description: string) => ({
  [status]: { description, schema: Campaign },
  409: { description: "SIM_CAMPAIGN_STATE (body.state: the campaign's state)" },
})

export const simCampaignsCreate = route({
  method: "POST",
  path: "/api/sim/campaigns",
  auth: "jwt",
  summary:
    "Start a simulation campaign: a free rehearsal of a workflow against simulated callees on the real runtime " +
    `(at most ${MAX_ACTIVE_CAMPAIGNS} active per workspace)`,
  tags: TAGS,
  body: { json: StartBody },
  responses: {
    201: { description: "The campaign, ready (nothing is charged: charged_minor 0, free true)", schema: Campaign },
    404: { description: "No such workflow in the workspace" },
    409: {
      description:
        `SIM_CAMPAIGN_LIMIT (${MAX_ACTIVE_CAMPAIGNS} campaigns already active), WORKFLOW_NOT_READY (no rule book), ` +
        "WORKFLOW_RETIRED",
    },
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* createCampaign(c, body!), 201)
    }),
})

export const simCampaignsList = route({
  method: "GET",
  path: "/api/sim/campaigns",
  auth: "jwt",
  summary: "The workspace's simulation campaigns, newest first",
  tags: TAGS,
  query: z.object({ before_id: Id.optional(), limit: QueryInt(1, 100).optional() }),
  responses: {
    200: {
      description: "{campaigns, active_limit}",
      schema: z.object({ campaigns: z.array(Campaign), active_limit: z.number().int() }),
    },
  },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* listCampaigns(c.tenantId, { limit: query.limit ?? 20, beforeId: query.before_id }))
    }),
})

export const simCampaignsGet = route({
  method: "GET",
  path: "/api/sim/campaigns/{campaign_id}",
  auth: "jwt",
  summary: "A simulation campaign: state, progress, outcomes, the pending question and the forecast",
  tags: TAGS,
  params: Params,
  responses: { 200: { description: "The campaign", schema: Campaign } },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* getCampaign(c.tenantId, params.campaign_id))
    }),
})

export const simCampaignsRunBatch = route({
  method: "POST",
  path: "/api/sim/campaigns/{campaign_id}/run-batch",
  auth: "jwt",
  summary: "Run the next batch: batch_size simulated conversations start on the runtime (ready → running)",
  tags: TAGS,
  params: Params,
  responses: campaignResponse(202, "The campaign, running"),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* runBatch(c.tenantId, params.campaign_id), 202)
    }),
})

export const simCampaignsAnswer = route({
  method: "POST",
  path: "/api/sim/campaigns/{campaign_id}/answer",
  auth: "jwt",
  summary:
    "Answer the pending question as an approval would: the held conversation continues " +
    "(awaiting_answer → running; also while stopped)",
  tags: TAGS,
  params: Params,
  body: {
    json: z.object({
      question_id: z.number({ error: "must be a question id" }).int("must be a question id").positive(),
      decision: z.enum(["approve", "deny"], { error: "must be approve or deny" }),
      note: z.string().trim().max(500, "must be at most 500 characters").optional(),
    }),
  },
  responses: {
    200: {
      description: "The campaign, with answered: {question_id, status, decided_at}",
      schema: Campaign.extend({
        answered: z.object({ question_id: z.number().int(), status: z.string(), decided_at: z.string().nullable() }),
      }),
    },
    404: { description: "No such campaign, or the question is not one of its" },
    409: {
      description: "SIM_CAMPAIGN_STATE (no question pending; body.state), APPROVAL_ALREADY_DECIDED or APPROVAL_EXPIRED",
    },
  },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(
        yield* answerQuestion(c, params.campaign_id, {
          question_id: body!.question_id,
          decision: body!.decision,
          note: body!.note || null,
        }),
      )
    }),
})

export const simCampaignsResume = route({
  method: "POST",
  path: "/api/sim/campaigns/{campaign_id}/resume",
  auth: "jwt",
  summary: "Resume a stopped campaign (→ ready, or running while conversations are in flight)",
  tags: TAGS,
  params: Params,
  responses: {
    ...campaignResponse(200, "The campaign"),
    409: {
      description: `SIM_CAMPAIGN_STATE (not stopped; body.state), SIM_CAMPAIGN_LIMIT (${MAX_ACTIVE_CAMPAIGNS} active)`,
    },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* resumeCampaign(c.tenantId, params.campaign_id))
    }),
})

export const simCampaignsStop = route({
  method: "POST",
  path: "/api/sim/campaigns/{campaign_id}/stop",
  auth: "jwt",
  summary: "Stop: nothing more is released; conversations in flight finish (idempotent once stopped)",
  tags: TAGS,
  params: Params,
  responses: campaignResponse(200, "The campaign, stopped"),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* stopCampaign(c.tenantId, params.campaign_id))
    }),
})
