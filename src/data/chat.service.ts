// A data source's chat: the user's message and the agent's reply, stored together. The simulator
// answers a documented set of questions itself (chat.sim.ts); a configured model gets a bounded
// sample and calls tools that Parley runs over the stored rows (chat.tools.ts), in a bounded loop.
import { Effect } from "effect"
import { Credentials } from "../onboarding/Credentials.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Db } from "../platform/Db.js"
import { GatewayUnavailable, NotFound } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { iso } from "../platform/time.js"
import { ownLlmOf } from "../providers/accounts.js"
import { Llm } from "../providers/Llm.js"
import {
  type LanguageModel,
  LlmCallError,
  type ToolChatMessage,
  type ToolChatRequest,
} from "../providers/llm/llm.interface.js"
import { tenantCountry } from "../workspaces/workspaces.repo.js"
import { audienceText, simAnswer } from "./chat.sim.js"
import { createAudience, type Row, runTool, TOOLS } from "./chat.tools.js"
import { allRows, appendMessage, getSource, listMessages, type MessageRow } from "./sources.repo.js"

/** The most rows a chat computes over (a source holds at most this many). */
export const CHAT_ROWS_MAX = 100_000
/** Rows of the source the model sees in its instructions. */
export const SAMPLE_ROWS = 5
/** Rounds of tool calls the model may ask for before it must answer. */
export const MAX_TOOL_ROUNDS = 5
/** Tool calls run per round; the rest get an error result. */
export const MAX_CALLS_PER_ROUND = 8
export const MESSAGE_MAX = 2_000

export const messageView = (m: MessageRow) => ({
  id: m.id,
  role: m.role,
  text: m.text,
  data: m.data,
  created_at: iso(m.created_at),
})

const notFound = (id: number) => new NotFound({ message: `data source ${id} not found` })

/** The model a workspace's chat uses: its own validated llm credential, else the platform's. */
const modelFor = (tenantId: number) =>
  Effect.gen(function* () {
    const credentials = yield* Credentials
    const own = yield* Effect.promise(() => credentials.active(tenantId, "llm"))
    if (own !== undefined) return ownLlmOf(own, yield* AppConfig)
    return yield* Llm
  })

interface Reply {
  readonly text: string
  readonly data: Record<string, unknown>
}

/** The user's message answered; both are stored (nothing is when the answer fails). */
export const chat = (who: { tenantId: number; userId: number | null }, sourceId: number, message: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const source = yield* Effect.promise(() => getSource(sql, who.tenantId, sourceId))
    if (source === undefined) return yield* Effect.fail(notFound(sourceId))
    const rows: Row[] = (yield* Effect.promise(() => allRows(sql, sourceId, CHAT_ROWS_MAX))).map((r) => r.data)
    const columns = source.columns
    const llm = yield* modelFor(who.tenantId)
    let answer: Reply
    if (llm.name === "sim") {
      const country = yield* Effect.promise(() => tenantCountry(sql, who.tenantId))
      const sim = simAnswer(message, { columns, rows, country })
      if (sim.kind === "reply") answer = sim
      else {
        const counts = yield* createAudience(who, rows, sim.ask)
        answer = {
          text: audienceText(sim.ask, counts),
          data: { question: "create_audience", ...sim.ask, ...counts },
        }
      }
    } else answer = yield* modelAnswer(llm, { who, name: source.name, columns, rows }, message)
    const stored = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        await appendMessage(tx, { tenantId: who.tenantId, sourceId, role: "user", text: message, data: {} })
        return appendMessage(tx, { tenantId: who.tenantId, sourceId, role: "agent", ...answer })
      }),
    )
    return { reply: messageView(stored as MessageRow) }
  })

/** The chat history, oldest first, a page at a time. */
export const history = (tenantId: number, sourceId: number, page: { after_id?: number | undefined; limit: number }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const source = yield* Effect.promise(() => getSource(sql, tenantId, sourceId))
    if (source === undefined) return yield* Effect.fail(notFound(sourceId))
    const messages = yield* Effect.promise(() => listMessages(sql, tenantId, sourceId, page))
    return {
      messages: messages.map(messageView),
      next_after_id: messages.length === page.limit ? (messages.at(-1)?.id ?? null) : null,
    }
  })

// ---------------------------------------------------------------------------------------------
// The model's loop

const instructions = (name: string, columns: ReadonlyArray<string>, rows: ReadonlyArray<Row>): string =>
  [
    `You answer questions about a table of customer rows called "${name}" (${rows.length} rows).`,
    `Columns: ${columns.join(", ")}.`,
    `The first ${Math.min(SAMPLE_ROWS, rows.length)} rows, as a sample only:`,
    ...rows.slice(0, SAMPLE_ROWS).map((r) => JSON.stringify(r)),
    "You never see the whole table: use the tools for any count, filter or list, and quote the numbers they " +
      "return. Answer briefly in plain text.",
  ].join("\n")

/** The bounded tool-call loop: every number in the reply comes from a tool Parley ran. */
const modelAnswer = (
  llm: LanguageModel,
  ctx: { who: { tenantId: number; userId: number | null }; name: string; columns: string[]; rows: Row[] },
  message: string,
) =>
  Effect.gen(function* () {
    const log = yield* Log
    const messages: ToolChatMessage[] = [
      { role: "system", content: instructions(ctx.name, ctx.columns, ctx.rows) },
      { role: "user", content: message },
    ]
    const tools: Array<{ name: string; arguments: unknown; result: Record<string, unknown> }> = []
    const data = () => ({ mode: "model", model: llm.model, tool_calls: tools })
    for (let round = 0; round <= MAX_TOOL_ROUNDS; round++) {
      const req: ToolChatRequest = { messages: [...messages], tools: TOOLS }
      const answer = yield* Effect.tryPromise({ try: () => llm.chatWithTools(req), catch: (e) => e }).pipe(
        Effect.catchAll((e) => {
          if (!(e instanceof LlmCallError)) return Effect.die(e)
          log.warn({ err: e, provider: llm.name }, "data chat: the model failed")
          return Effect.fail(new GatewayUnavailable({ message: `the language model could not answer: ${e.message}` }))
        }),
      )
      if (answer.tool_calls.length === 0) return { text: (answer.text ?? "").trim(), data: data() }
      if (round === MAX_TOOL_ROUNDS) break
      messages.push({ role: "assistant", content: answer.text, tool_calls: answer.tool_calls })
      for (const [i, call] of answer.tool_calls.entries()) {
        const result =
          i < MAX_CALLS_PER_ROUND
            ? yield* runTool(call, ctx)
            : { error: `at most ${MAX_CALLS_PER_ROUND} tool calls per round` }
        messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) })
        tools.push({ name: call.name, arguments: parseOr(call.arguments), result: summary(result) })
      }
    }
    return {
      text:
        `Sorry, I could not finish answering within ${MAX_TOOL_ROUNDS} rounds of looking at the data. ` +
        "Please ask a narrower question.",
      data: { ...data(), rounds_exceeded: true },
    }
  })

/** A tool result as the reply's data keeps it: the numbers, not the rows. */
const summary = (result: Record<string, unknown>): Record<string, unknown> => {
  const { rows: _rows, ...rest } = result
  return rest
}

const parseOr = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}
