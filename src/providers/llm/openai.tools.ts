// Tool calling over an OpenAI-compatible Chat Completions API: the request body (`tools` as
// functions, the conversation with its `tool_calls` and `tool` results) and the answer read back.
import type { Attempt } from "../http.util.js"
import { LlmCallError, type ToolCall, type ToolChatAnswer, type ToolChatRequest } from "./llm.interface.js"

/** How much of a refusal goes into the error message. */
const DETAIL_CHARS = 200

/** The chat-completions body for one round: the conversation so far and the tools offered. */
export function toolChatBody(model: string, req: ToolChatRequest): string {
  const messages = req.messages.map((m) =>
    m.role === "assistant"
      ? {
          role: "assistant",
          content: m.content,
          ...(m.tool_calls !== undefined &&
            m.tool_calls.length > 0 && {
              tool_calls: m.tool_calls.map((c) => ({
                id: c.id,
                type: "function",
                function: { name: c.name, arguments: c.arguments },
              })),
            }),
        }
      : m,
  )
  return JSON.stringify({
    model,
    temperature: 0,
    messages,
    tools: req.tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.parameters },
    })),
  })
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** The text or tool calls of a 2xx chat completion; a malformed one fails the same way every time. */
export function readToolCompletion(text: string, status: number): Attempt<ToolChatAnswer, LlmCallError> {
  const fail = (message: string): Attempt<ToolChatAnswer, LlmCallError> => ({
    ok: false,
    error: new LlmCallError(message, false, { status }),
  })
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return fail(`language model API answered ${status} with a body that is not JSON`)
  }
  const choices = isObject(body) ? body.choices : undefined
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined
  const message = isObject(first) ? first.message : undefined
  if (!isObject(message)) return fail(`language model API answered ${status} without a completion message`)
  if (typeof message.refusal === "string" && message.refusal.trim() !== "")
    return fail(`language model refused: ${message.refusal.replace(/\s+/g, " ").trim().slice(0, DETAIL_CHARS)}`)
  const calls: ToolCall[] = []
  const raw = message.tool_calls
  if (Array.isArray(raw)) {
    for (const c of raw) {
      const fn = isObject(c) ? c.function : undefined
      if (!isObject(c) || !isObject(fn) || typeof fn.name !== "string")
        return fail("language model answered with a malformed tool call")
      const args = fn.arguments
      calls.push({
        id: typeof c.id === "string" ? c.id : `call_${calls.length}`,
        name: fn.name,
        arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}),
      })
    }
  }
  const content = typeof message.content === "string" && message.content.trim() !== "" ? message.content : null
  if (calls.length === 0 && content === null) return fail("language model answered with neither text nor tool calls")
  return { ok: true, value: { text: content, tool_calls: calls } }
}
