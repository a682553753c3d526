// POST /data/sources/{source_id}/chat: a question about a source's rows, answered by its agent
// (both stored); GET the same path: the chat history, oldest first, paged by after_id.
import { Effect } from "effect"
import { z } from "zod"
import { chat, history, MESSAGE_MAX } from "../../src/data/chat.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id, QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

const Message = z.object({
  id: z.number().int(),
  role: z.enum(["user", "agent", "system"]),
  text: z.string(),
  data: z.record(z.string(), z.unknown()),
  created_at: z.string(),
})

export const dataChatPost = route({
  method: "POST",
  path: "/data/sources/{source_id}/chat",
  auth: "jwt",
  summary:
    "Ask the source's agent about its rows (the simulator answers a documented set of questions; a configured " +
    "model calls count_rows, filter_rows, top_values and create_audience); answers the agent's reply",
  tags: ["data"],
  params: z.object({ source_id: Id }),
  body: {
    json: z.object({
      message: z
        .string({ error: "is required" })
        .trim()
        .min(1, "is required")
        .max(MESSAGE_MAX, `must be at most ${MESSAGE_MAX} characters`),
    }),
  },
  responses: { 200: { description: "The agent's reply", schema: z.object({ reply: Message }) } },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      const who = { tenantId: caller.tenantId, userId: caller.kind === "user" ? caller.userId : null }
      return json(yield* chat(who, params.source_id, body!.message))
    }),
})

export const dataChatGet = route({
  method: "GET",
  path: "/data/sources/{source_id}/chat",
  auth: "jwt",
  summary: "The source's chat history, oldest first (after_id; limit 1–200, default 50)",
  tags: ["data"],
  params: z.object({ source_id: Id }),
  query: z.object({
    after_id: QueryInt(0, Number.MAX_SAFE_INTEGER).optional(),
    limit: QueryInt(1, 200).optional(),
  }),
  responses: {
    200: {
      description: "Messages, oldest first; next_after_id is null on the last page",
      schema: z.object({ messages: z.array(Message), next_after_id: z.number().int().nullable() }),
    },
  },
  handler: ({ principal, params, query }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(
        yield* history(caller.tenantId, params.source_id, { after_id: query.after_id, limit: query.limit ?? 50 }),
      )
    }),
})
