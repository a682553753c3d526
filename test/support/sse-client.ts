// A small server-sent-events client for tests: connects with node:http, parses events as they
// arrive (id, data, comments), and can stop reading to play a stalled client.
import { type IncomingMessage, request } from "node:http"

export interface SseEvent {
  readonly id: string | undefined
  readonly data: string
  /** The event's name, when it has one (`event:`); turns are unnamed. */
  readonly event?: string
}

export interface SseClient {
  readonly status: Promise<number>
  readonly events: SseEvent[]
  readonly comments: string[]
  /** Resolves when the server ends the stream (or the connection drops). */
  readonly ended: Promise<void>
  /** Resolves once `n` events have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<void>
  /** Stops reading from the socket (the server's writes back up). */
  stall(): void
  /** Reads again after stall(). */
  resume(): void
  close(): void
  /** The data of each event, parsed as JSON. */
  json<T = Record<string, unknown>>(): T[]
}

export function sse(url: string, headers: Record<string, string> = {}): SseClient {
  const events: SseEvent[] = []
  const comments: string[] = []
  const waiters: Array<{ n: number; resolve: () => void }> = []
  let res: IncomingMessage | undefined
  let buffer = ""
  let endedResolve!: () => void
  const ended = new Promise<void>((r) => (endedResolve = r))
  let statusResolve!: (s: number) => void
  const status = new Promise<number>((r) => (statusResolve = r))

  const req = request(url, { headers: { accept: "text/event-stream", ...headers } }, (r) => {
    res = r
    statusResolve(r.statusCode ?? 0)
    r.setEncoding("utf8")
    r.on("data", (chunk: string) => {
      buffer += chunk
      let at: number
      while ((at = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, at)
        buffer = buffer.slice(at + 2)
        let id: string | undefined
        let event: string | undefined
        const data: string[] = []
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) comments.push(line.slice(1).trim())
          else if (line.startsWith("id:")) id = line.slice(3).trim()
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
          else if (line.startsWith("event:")) event = line.slice(6).trim()
        }
        if (data.length > 0) events.push({ id, data: data.join("\n"), ...(event !== undefined && { event }) })
      }
      for (const w of [...waiters]) if (events.length >= w.n) w.resolve()
    })
    r.on("end", endedResolve)
    r.on("close", endedResolve)
    r.on("error", endedResolve)
  })
  req.on("error", () => {
    statusResolve(0)
    endedResolve()
  })
  req.end()

  return {
    status,
    events,
    comments,
    ended,
    waitFor: (n, timeoutMs = 10_000) =>
      new Promise<void>((resolve, reject) => {
        if (events.length >= n) return resolve()
        const timer = setTimeout(() => reject(new Error(`only ${events.length} of ${n} events arrived`)), timeoutMs)
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer)
            resolve()
          },
        })
      }),
    stall: () => {
      res?.pause()
      // Stop the socket itself from draining into Node's buffers.
      res?.socket?.pause()
    },
    resume: () => {
      res?.socket?.resume()
      res?.resume()
    },
    close: () => {
      req.destroy()
      endedResolve()
    },
    json: <T>() => events.map((e) => JSON.parse(e.data) as T),
  }
}
