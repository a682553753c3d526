// What the webhook delivery suites share: a local receiver that answers as told (a status, a
// redirect, or never), endpoints written the way the endpoints API stores them (secret sealed), an
// independent signature check, and waiting on the database.
import { createHmac, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import type { Config } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"
import { newWebhookSecret, webhookSecretBox, webhookSecretKey } from "../../src/webhooks/secrets.js"

export interface Received {
  readonly headers: IncomingMessage["headers"]
  readonly body: Buffer
  readonly at: number
}

/**
 * How the receiver answers: a status (with an optional body; `stall`: the status line and the body so
 * far, then nothing more, the response never ended), "hang" (never answers) or "endless" (200, then a
 * body that never ends).
 */
export type Answer =
  | number
  | "hang"
  | "endless"
  | { status: number; body?: string; headers?: Record<string, string>; stall?: boolean }

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: Received[]
  /** Changes the answer from the next request on. */
  answer(a: Answer | ((n: number) => Answer)): void
  close(): Promise<void>
}

export async function startReceiver(initial: Answer | ((n: number) => Answer) = 200): Promise<Receiver> {
  let answer = typeof initial === "function" ? initial : () => initial
  const received: Received[] = []
  const sockets = new Set<Socket>()
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks), at: Date.now() })
      const a = answer(received.length)
      if (a === "hang") return
      if (a === "endless") {
        res.writeHead(200, { "content-type": "text/plain" })
        const chunk = Buffer.alloc(16 * 1024, 120)
        const timer = setInterval(() => res.write(chunk), 5)
        res.on("close", () => clearInterval(timer))
        return
      }
      const { status, body, headers, stall } =
        typeof a === "number" ? { status: a, body: "", headers: {}, stall: false } : a
      res.writeHead(status, { "content-type": "text/plain", ...headers })
      if (stall === true) {
        // Sent at once, then silence: the status line is all the worker will get.
        res.flushHeaders()
        if (body !== undefined) res.write(body)
        return
      }
      res.end(body ?? "")
    })
  })
  server.on("connection", (s: Socket) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    answer: (a) => {
      answer = typeof a === "function" ? a : () => a
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy()
        server.close(() => r())
      }),
  }
}

/**
 * Receivers a suite starts as it goes, closed together in its afterAll (closing them also ends posts
 * left hanging, so the server stops without waiting out their timeouts).
 */
export function receiverPool() {
  const started: Receiver[] = []
  return {
    start: async (initial?: Answer | ((n: number) => Answer)): Promise<Receiver> => {
      const r = await startReceiver(initial)
      started.push(r)
      return r
    },
    closeAll: () => Promise.all(started.map((r) => r.close())),
  }
}

export interface TestEndpoint {
  readonly id: number
  readonly secret: string
}

/** An endpoint row as the endpoints API writes it: the secret sealed under the deployment's key. */
export async function createEndpoint(
  sql: Sql,
  config: Config,
  tenantId: number,
  url: string,
  opts: { events?: string[]; enabled?: boolean; previousSecret?: string; previousExpiresInSeconds?: number } = {},
): Promise<TestEndpoint> {
  const box = webhookSecretBox(await webhookSecretKey(config, sql))
  const secret = newWebhookSecret()
  const previous = opts.previousSecret === undefined ? null : box.seal(opts.previousSecret, tenantId)
  const expires =
    opts.previousExpiresInSeconds === undefined ? null : new Date(Date.now() + opts.previousExpiresInSeconds * 1000)
  const [row] = await sql<[{ id: number }]>`
    insert into webhook_endpoints
      (tenant_id, url, events, enabled, secret_ciphertext, previous_secret_ciphertext, previous_secret_expires_at)
    values (${tenantId}, ${url}, ${sql.array(opts.events ?? ["*"])}, ${opts.enabled ?? true},
      ${box.seal(secret, tenantId)}, ${previous}, ${expires})
    returning id`
  return { id: row.id, secret }
}

/** The receiver's check, from the contract alone: every v1 entry tried, 5-minute window, constant time. */
export function signatureValid(raw: Buffer, header: string | undefined, secret: string): boolean {
  if (header === undefined) return false
  const parts = header.split(",").map((p) => p.split("=") as [string, string])
  const t = parts.find(([k]) => k === "t")?.[1]
  if (t === undefined || Math.abs(Date.now() / 1000 - Number(t)) > 300) return false
  const expected = createHmac("sha256", secret).update(`${t}.`).update(raw).digest()
  return parts
    .filter(([k]) => k === "v1")
    .some(([, v]) => {
      const got = Buffer.from(v, "hex")
      return got.length === expected.length && timingSafeEqual(got, expected)
    })
}

/** Polls `probe` every 50 ms until it answers something other than undefined. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await probe()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export interface DeliveryState {
  readonly id: number
  readonly status: "pending" | "delivered" | "failed"
  readonly attempts: number
  readonly locked_by: string | null
  readonly last_status_code: number | null
  readonly last_error: string | null
  readonly delivered_at: Date | null
}

export async function deliveryOf(sql: Sql, eventId: string, endpointId: number): Promise<DeliveryState | undefined> {
  const [row] = await sql<[DeliveryState?]>`
    select id, status, attempts, locked_by, last_status_code, last_error, delivered_at from webhook_deliveries
    where event_id = ${eventId} and endpoint_id = ${endpointId}`
  return row
}

export interface AttemptState {
  readonly attempt: number
  readonly outcome: "delivered" | "retry" | "failed"
  readonly status_code: number | null
  readonly error: string | null
  readonly latency_ms: number
  readonly started_at: Date
  readonly next_attempt_at: Date | null
}

export const attemptsOf = (sql: Sql, deliveryId: number): Promise<AttemptState[]> =>
  sql<AttemptState[]>`
    select attempt, outcome, status_code, error, latency_ms, started_at, next_attempt_at from webhook_attempts
    where delivery_id = ${deliveryId} order by attempt`
