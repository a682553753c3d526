// POST /kb/feedback: a verdict (reward, punish, ban) on one of the agent's turns, kept as a row of its
// own, which the learning policy may turn into a rule; GET /kb/feedback: every verdict, newest first.
import { Effect } from "effect"
import { z } from "zod"
import {
  FEEDBACK_LIST_DEFAULT,
  FEEDBACK_LIST_MAX,
  giveFeedback,
  listFeedback,
  NOTE_MAX,
} from "../../src/kb/feedback.service.js"
import { VERDICTS } from "../../src/kb/learning.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

const Verdict = z.enum(VERDICTS, { error: `must be one of ${VERDICTS.join(", ")}` })

const FEEDBACK_SHAPE =
  "{id, turn_id, run_id, workflow_id, verdict, note, line (the agent's line with {name}, {agent_name} and " +
  '{company} put back), reviewer: {kind: "user"|"api_key", id}, rule_ids, current (still the reviewer\'s ' +
  "latest verdict on the line: the one learning counts), created_at, updated_at (= created_at)}"

export const feedbackCreate = route({
  method: "POST",
  path: "/kb/feedback",
  auth: "jwt",
  permission: "supervise",
  summary:
    "Give a verdict on one of the agent's turns (another workspace's turn: 404; a callee or system turn: 422 " +
    "on turn_id). Every verdict is a new one (201), kept: a reviewer's next verdict on the line replaces " +
    "their earlier one in the learning policy's counts, not on record. Verdicts may become rules: a ban at " +
    "once forbids the line; two reviewers' punishes propose a paused alternative; two reviewers' rewards " +
    "(more than punishes) make the line the answer to its objection",
  tags: ["knowledge base"],
  body: {
    json: z.object({
      turn_id: z
        .number({ error: "is required and must be a positive integer" })
        .int("must be a positive integer")
        .positive("must be a positive integer")
        .max(Number.MAX_SAFE_INTEGER, "must be a positive integer"),
      verdict: Verdict,
      note: z.string().trim().max(NOTE_MAX, `must be at most ${NOTE_MAX} characters`).nullish(),
    }),
  },
  responses: { 201: { description: `the verdict: ${FEEDBACK_SHAPE}` } },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const note = body!.note === undefined || body!.note === null || body!.note === "" ? null : body!.note
      return json(yield* giveFeedback(caller, { turn_id: body!.turn_id, verdict: body!.verdict, note }), 201)
    }),
})

export const feedbackList = route({
  method: "GET",
  path: "/kb/feedback",
  auth: "jwt",
  summary:
    "List every verdict given (a reviewer's earlier ones too, current: false), newest first " +
    `(turn_id?, verdict?, limit 1–${FEEDBACK_LIST_MAX}, default ${FEEDBACK_LIST_DEFAULT})`,
  tags: ["knowledge base"],
  query: z.object({
    turn_id: Id.optional(),
    verdict: Verdict.optional(),
    limit: QueryInt(1, FEEDBACK_LIST_MAX).optional(),
  }),
  responses: { 200: { description: `{feedback: [${FEEDBACK_SHAPE}]}` } },
  handler: ({ principal, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(
        yield* listFeedback(caller.tenantId, {
          turnId: query.turn_id,
          verdict: query.verdict,
          limit: query.limit ?? FEEDBACK_LIST_DEFAULT,
        }),
      )
    }),
})
