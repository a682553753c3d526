// A local OpenAI-compatible API (node:http on 127.0.0.1): it records each request and answers from a
// script in order — a JSON answer, "hang" (never answered), or a function that writes the answer
// itself (Server-Sent Events, held open as long as it likes). A request the script does not cover
// gets the fallback's answer (a 500 unless told otherwise).
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface Recorded {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: Record<string, unknown>
  at: number
}

/** One scripted answer: JSON with a status, "hang", or a writer of the response. */
export type Scripted =
  | { status: number; body: unknown; headers?: Record<string, string> }
  | "hang"
  | ((res: ServerResponse) => void | Promise<void>)

export interface FakeOpenAi {
  /** The API root, /v1 included. */
  readonly url: string
  readonly requests: Recorded[]
  /** Answers the next requests in order. */
  script(...answers: Scripted[]): void
  reset(): void
  close(): Promise<void>
}

/** A chat completion whose message is `content`. */
export const completion = (content: string | null, extra: Record<string, unknown> = {}) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content, refusal: null, ...extra }, finish_reason: "stop" }],
})

const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": "application/json", ...headers })
  res.end(typeof body === "string" ? body : JSON.stringify(body))
}

export async function startFakeOpenAi(
  fallback: Scripted = { status: 500, body: "nothing scripted" },
): Promise<FakeOpenAi> {
  const requests: Recorded[] = []
  const queue: Scripted[] = []
  const answer = (res: ServerResponse, a: Scripted) => {
    if (a === "hang") return
    if (typeof a === "function") return void Promise.resolve(a(res)).catch(() => res.destroy())
    send(res, a.status, a.body, a.headers)
  }
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      requests.push({
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>,
        at: Date.now(),
      })
      answer(res, queue.shift() ?? fallback)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    script: (...answers) => void queue.push(...answers),
    reset() {
      requests.length = 0
      queue.length = 0
    },
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
