// GET /api/calls/{call_id}: one call of the workspace with its outcome, cost, transcript and
// post-call analysis. Another workspace's call is 404, as a missing one is.
import { Effect } from "effect"
import { z } from "zod"
import { Recordings } from "../../src/recordings/recordings.service.js"
import { getCall } from "../../src/results/results.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

const Analysis = z.object({
  status: z.enum(["pending", "done", "failed"]),
  attempts: z.number().int(),
  summary: z.string().nullable(),
  goal_met: z.boolean().nullable(),
  sentiment: z.enum(["positive", "neutral", "negative"]).nullable(),
  callback_at: z
    .string()
    .nullable()
    .describe("when the callee is called back, as the runtime scheduled it after an approved callback; else null"),
  agreed_value_minor: z.number().int().nullable().describe("the approved concession, from the approval"),
  fields: z.record(z.string(), z.unknown()).describe("the workflow's extracted fields by name"),
  model: z.string().nullable().describe("the model asked (the workspace's own, the platform's, or sim-1)"),
  model_version: z
    .string()
    .nullable()
    .describe("the model version the provider reported answering with (e.g. a dated snapshot); null if none"),
  error: z.string().nullable().describe("why the last attempt failed (a failed analysis keeps it)"),
  charged_minor: z.number().int().nullable(),
  analyzed_at: z.string().nullable(),
})

export const CallBody = z.object({
  id: z.number().int(),
  call_id: z.number().int(),
  run_id: z.number().int(),
  workflow_id: z.number().int(),
  target_id: z.number().int(),
  phone: z.string(),
  name: z.string().nullable(),
  attempt: z.number().int(),
  provider: z.string(),
  status: z.enum(["dialing", "connected", "ended"]),
  outcome: z.string().nullable(),
  started_at: z.string(),
  answered_at: z.string().nullable(),
  ended_at: z.string().nullable(),
  talk_seconds: z.number().int(),
  reserved_minor: z.number().int().nullable(),
  cost_minor: z.number().int().nullable(),
  currency: z.enum(["INR", "USD"]),
  transcript: z.array(
    z.object({
      seq: z.number().int(),
      turn_index: z.number().int(),
      speaker: z.enum(["agent", "callee", "system"]),
      text: z.string(),
      at: z.string(),
      interrupted: z
        .literal(true)
        .optional()
        .describe("an agent turn the callee spoke over (a call heard as audio): text is what they heard whole"),
      latency_ms: z
        .object({
          total: z.number().int(),
          endpointing: z.number().int(),
          transcript: z.number().int(),
          model: z.number().int(),
          synthesis: z.number().int(),
          hop: z.number().int(),
        })
        .optional()
        .describe(
          "an agent turn of a call heard as audio that answered the callee while the agent waited: end of their " +
            "speech to its first audio (total), by stage",
        ),
    }),
  ),
  transcript_truncated: z.boolean(),
  provider_failures: z
    .array(
      z.object({
        at: z.string(),
        stage: z.enum(["recognition", "synthesis"]),
        provider: z.string(),
        message: z.string(),
      }),
    )
    .describe(
      "hosted speech vendors (the workspace's or the platform's) that failed this call heard as audio; the call " +
        "went on with the offline engine from then",
    ),
  experiment_id: z.number().int().nullable().describe("the experiment the call was placed in; null outside one"),
  arm: z.string().nullable().describe("its arm: the call's rule book, persona and voice were that arm's"),
  analysis: Analysis.nullable(),
  recording: z
    .object({
      url: z.string().describe("GET it for the audio (Ogg Opus, both sides mixed); `?track=sides` for stereo"),
      sides_url: z.string(),
      duration_ms: z.number().int(),
      bytes: z.number().int(),
      expires_at: z.string().describe("when the workspace's retention deletes it"),
      cues: z
        .array(z.object({ at_ms: z.number().int(), speaker: z.enum(["agent", "callee"]) }))
        .describe("where each turn began in the recording, in order: a speaker's k-th cue is its k-th turn"),
    })
    .nullable()
    .describe("the call's recording (a call heard as audio, whose rule book discloses recording); else null"),
})

export default route({
  method: "GET",
  path: "/api/calls/{call_id}",
  auth: "jwt",
  summary: "A call: attempt, outcome, times, talk seconds, cost, its transcript in seq order, and its analysis",
  tags: ["runs"],
  params: z.object({ call_id: Id }),
  responses: {
    200: {
      description:
        "The call; transcript at most 1,000 turns (transcript_truncated says when cut); analysis null when the " +
        "call never connected or the workflow's analysis is off",
      schema: CallBody,
    },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      const call = yield* getCall(c.tenantId, params.call_id)
      const recordings = yield* Recordings
      const r = yield* Effect.promise(() => recordings.recordingOf(c.tenantId, params.call_id, "mixed"))
      const at = `/api/calls/${params.call_id}/recording`
      const recording =
        r === undefined
          ? null
          : {
              url: at,
              sides_url: `${at}?track=sides`,
              duration_ms: r.duration_ms,
              bytes: r.bytes,
              expires_at: r.expires_at.toISOString(),
              cues: r.cues,
            }
      return json({ ...call, recording })
    }),
})
