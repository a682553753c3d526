// Local stand-ins for the two payment gateways' APIs (node:http on 127.0.0.1:0) that record each
// request, check credentials, answer like the real APIs, inject failures and send signed webhooks.
import { randomBytes } from "node:crypto"
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { signGwCard, signGwUpi } from "../src/providers/payments/signatures.js"

export interface RecordedRequest {
  readonly method: string
  /** Path and query, e.g. /v1/orders. */
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
  /** The status the fake answered (0 while it has not, or when it never did). */
  status: number
}

export interface Delivery {
  readonly status: number
  /** The receiver's answer body. */
  readonly body: string
  /** Exactly the bytes that were signed and sent. */
  readonly payload: string
  readonly eventId: string
  readonly headers: Record<string, string>
}

/** How the next requests misbehave, consumed one per request in order. */
type Fault = { kind: "fail"; status: number; body: unknown; headers: Record<string, string> } | { kind: "hang" } | { kind: "delay"; ms: number }

interface FakeBase {
  /** Base URL to configure as the gateway's apiUrl (no trailing slash). */
  readonly url: string
  readonly requests: RecordedRequest[]
  /** The next `times` requests are answered with `status` (a gateway-shaped error body unless given). */
  failNext(status: number, times?: number, options?: { body?: unknown; headers?: Record<string, string> }): void
  /** The next `times` requests are never answered (client timeouts). */
  hangNext(times?: number): void
  /** The next `times` requests are processed at once but answered only after `ms` (a timeout after success). */
  delayNext(ms: number, times?: number): void
  /** Forgets requests and pending faults (not created sessions or orders). */
  reset(): void
  close(): Promise<void>
}

const rid = (prefix: string, bytes = 12): string => `${prefix}${randomBytes(bytes).toString("base64url").replace(/[-_]/g, "x")}`

/** A node:http server on 127.0.0.1:0 running `handle` after recording the request and applying faults. */
async function startFake(handle: (req: RecordedRequest, res: ServerResponse) => void, errorBody: (status: number) => unknown) {
  const requests: RecordedRequest[] = []
  const faults: Fault[] = []
  const timers = new Set<NodeJS.Timeout>()
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const recorded: RecordedRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        status: 0,
      }
      requests.push(recorded)
      const fault = faults.shift()
      if (fault?.kind === "hang") return
      if (fault?.kind === "fail") {
        recorded.status = fault.status
        send(res, fault.status, fault.body, fault.headers)
        return
      }
      if (fault?.kind === "delay") {
        // Processed now, answered later: the client may have given up by then.
        const buffered = bufferResponse()
        handle(recorded, buffered.res)
        const timer = setTimeout(() => {
          timers.delete(timer)
          if (!res.destroyed) buffered.replay(res)
        }, fault.ms)
        timers.add(timer)
        return
      }
      handle(recorded, res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const base: FakeBase = {
    url,
    requests,
    failNext(status, times = 1, options = {}) {
      for (let i = 0; i < times; i++) faults.push({ kind: "fail", status, body: options.body ?? errorBody(status), headers: options.headers ?? {} })
    },
    hangNext(times = 1) {
      for (let i = 0; i < times; i++) faults.push({ kind: "hang" })
    },
    delayNext(ms, times = 1) {
      for (let i = 0; i < times; i++) faults.push({ kind: "delay", ms })
    },
    reset() {
      requests.length = 0
      faults.length = 0
    },
    async close() {
      for (const t of timers) clearTimeout(t)
      timers.clear()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  return base
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers })
  res.end(JSON.stringify(body))
}

/** A stand-in response that captures status and body so they can be written later. */
function bufferResponse(): { res: ServerResponse; replay(to: ServerResponse): void } {
  let status = 200
  let headers: Record<string, string> = {}
  let body = ""
  const fake = {
    writeHead(s: number, h?: Record<string, string>) {
      status = s
      headers = h ?? {}
      return fake
    },
    end(chunk?: string) {
      body = chunk ?? ""
      return fake
    },
  }
  return {
    res: fake as unknown as ServerResponse,
    replay(to) {
      to.writeHead(status, headers)
      to.end(body)
    },
  }
}

async function post(toUrl: string, payload: string, headers: Record<string, string>, eventId: string): Promise<Delivery> {
  const res = await fetch(toUrl, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: payload })
  return { status: res.status, body: await res.text(), payload, eventId, headers }
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000)

// ---------------------------------------------------------------------------------------------
// gw_card: Checkout Sessions, form-encoded, bearer secret key, idempotency keys.

export interface FakeCardSession {
  id: string
  url: string
  amount_total: number
  currency: string
  client_reference_id: string | null
  metadata: Record<string, string>
  success_url: string
  cancel_url: string | null
  payment_status: "unpaid" | "paid"
  status: "open" | "complete"
}

export interface GwCardDeliverOptions {
  /** Sign with this secret instead of the configured webhook secret. */
  secret?: string
  /** Unix seconds to sign at; default now. */
  timestamp?: number
  /** Send this header value verbatim instead of a computed signature (omitted when null). */
  signature?: string | null
  eventId?: string
  type?: string
  /** Merged over data.object. */
  object?: Record<string, unknown>
}

export interface FakeGwCard extends FakeBase {
  readonly sessions: Map<string, FakeCardSession>
  deliver(toUrl: string, sessionId: string, opts?: GwCardDeliverOptions): Promise<Delivery>
}

/** The card gateway's minimum charge (USD 0.50), as the real API enforces it. */
const CARD_MIN_AMOUNT = 50

export async function startFakeGwCard(config: { secretKey: string; webhookSecret: string }): Promise<FakeGwCard> {
  const sessions = new Map<string, FakeCardSession>()
  const idempotent = new Map<string, { body: string; status: number; answer: unknown }>()
  const cardError = (status: number, message: string, extra: Record<string, unknown> = {}) => ({
    error: { type: status === 401 ? "invalid_request_error" : status >= 500 ? "api_error" : "invalid_request_error", message, ...extra },
  })
  let url = ""

  const base = await startFake(
    (req, res) => {
      const answer = (status: number, body: unknown) => {
        req.status = status
        send(res, status, body)
      }
      const auth = req.headers.authorization ?? ""
      if (auth !== `Bearer ${config.secretKey}`) {
        // The real API masks all but the last four characters of a wrong key.
        const given = auth.startsWith("Bearer ") ? auth.slice(7) : ""
        return answer(401, cardError(401, `Invalid API Key provided: ${given === "" ? "(none)" : `****${given.slice(-4)}`}`))
      }
      if (req.method !== "POST" || req.path !== "/v1/checkout/sessions") {
        return answer(404, cardError(404, `Unrecognized request URL (${req.method}: ${req.path})`))
      }
      if (!(req.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")) {
        return answer(400, cardError(400, "Invalid request: expected application/x-www-form-urlencoded"))
      }
      const key = req.headers["idempotency-key"]
      if (typeof key === "string") {
        const seen = idempotent.get(key)
        if (seen !== undefined) {
          if (seen.body !== req.body) {
            return answer(400, cardError(400, "Keys for idempotent requests can only be used with the same parameters they were first used with.", { type: "idempotency_error" }))
          }
          return answer(seen.status, seen.answer)
        }
      }
      const form = new URLSearchParams(req.body)
      const required = [
        "mode",
        "line_items[0][price_data][currency]",
        "line_items[0][price_data][unit_amount]",
        "line_items[0][price_data][product_data][name]",
        "line_items[0][quantity]",
        "success_url",
      ]
      const missing = required.find((k) => (form.get(k) ?? "") === "")
      const remember = (status: number, body: unknown) => {
        if (typeof key === "string") idempotent.set(key, { body: req.body, status, answer: body })
        answer(status, body)
      }
      if (missing !== undefined) return remember(400, cardError(400, `Missing required param: ${missing}.`, { code: "parameter_missing", param: missing }))
      if (form.get("mode") !== "payment") return remember(400, cardError(400, "Invalid mode.", { param: "mode" }))
      const unit = Number(form.get("line_items[0][price_data][unit_amount]"))
      const quantity = Number(form.get("line_items[0][quantity]"))
      if (!Number.isSafeInteger(unit) || unit < 0 || !Number.isSafeInteger(quantity) || quantity < 1) {
        return remember(400, cardError(400, "Invalid integer.", { param: "line_items[0][price_data][unit_amount]" }))
      }
      if (unit * quantity < CARD_MIN_AMOUNT) {
        return remember(400, cardError(400, "The Checkout Session's total amount due must add up to at least $0.50 usd", { code: "amount_too_small" }))
      }
      const metadata: Record<string, string> = {}
      for (const [k, v] of form) {
        const m = /^metadata\[(.+)\]$/.exec(k)
        if (m?.[1] !== undefined) metadata[m[1]] = v
      }
      const id = rid("cs_test_a1", 18)
      const session: FakeCardSession = {
        id,
        url: `${url}/c/pay/${id}`,
        amount_total: unit * quantity,
        currency: form.get("line_items[0][price_data][currency]") ?? "",
        client_reference_id: form.get("client_reference_id"),
        metadata,
        success_url: form.get("success_url") ?? "",
        cancel_url: form.get("cancel_url"),
        payment_status: "unpaid",
        status: "open",
      }
      sessions.set(id, session)
      remember(200, { object: "checkout.session", mode: "payment", livemode: false, created: nowSeconds(), ...session })
    },
    (status) => cardError(status, status === 429 ? "Too many requests" : status >= 500 ? "An unknown error occurred" : "Request failed"),
  )
  url = base.url

  return {
    ...base,
    sessions,
    async deliver(toUrl, sessionId, opts = {}) {
      const session = sessions.get(sessionId)
      if (session !== undefined) {
        session.payment_status = "paid"
        session.status = "complete"
      }
      const eventId = opts.eventId ?? rid("evt_1")
      const object = {
        object: "checkout.session",
        id: sessionId,
        amount_total: session?.amount_total ?? 0,
        currency: session?.currency ?? "usd",
        payment_status: "paid",
        status: "complete",
        client_reference_id: session?.client_reference_id ?? null,
        metadata: session?.metadata ?? {},
        payment_intent: rid("pi_"),
        ...opts.object,
      }
      const payload = JSON.stringify({
        id: eventId,
        object: "event",
        type: opts.type ?? "checkout.session.completed",
        created: nowSeconds(),
        livemode: false,
        data: { object },
      })
      const signature =
        opts.signature === undefined ? signGwCard(payload, opts.secret ?? config.webhookSecret, opts.timestamp ?? nowSeconds()) : opts.signature
      // The gateway sends gw_card-Signature; our HTTP engine drops underscore header names, so the
      // deployment's proxy forwards it hyphenated (README), and so does this fake.
      return post(toUrl, payload, signature === null ? {} : { "gw-card-Signature": signature }, eventId)
    },
  }
}

// ---------------------------------------------------------------------------------------------
// gw_upi: orders, JSON, HTTP Basic key id and secret.

export interface FakeUpiOrder {
  id: string
  amount: number
  currency: string
  receipt: string | null
  notes: Record<string, unknown>
  status: "created" | "attempted" | "paid"
}

export interface GwUpiDeliverOptions {
  secret?: string
  /** Send this header value verbatim instead of a computed signature (omitted when null). */
  signature?: string | null
  /** The X-gw_upi-Event-Id header; null omits it. */
  eventId?: string | null
  event?: string
  /** Merged over payload.payment.entity. */
  entity?: Record<string, unknown>
}

export interface FakeGwUpi extends FakeBase {
  readonly orders: Map<string, FakeUpiOrder>
  deliver(toUrl: string, orderId: string, opts?: GwUpiDeliverOptions): Promise<Delivery>
}

/** The UPI gateway's minimum order (INR 1.00), as the real API enforces it. */
const UPI_MIN_AMOUNT = 100

export async function startFakeGwUpi(config: { keyId: string; keySecret: string; webhookSecret: string }): Promise<FakeGwUpi> {
  const orders = new Map<string, FakeUpiOrder>()
  const upiError = (description: string, field?: string) => ({
    error: { code: "BAD_REQUEST_ERROR", description, source: "business", step: "payment_initiation", reason: "input_validation_failed", ...(field !== undefined && { field }) },
  })
  const expectedAuth = `Basic ${Buffer.from(`${config.keyId}:${config.keySecret}`).toString("base64")}`

  const base = await startFake(
    (req, res) => {
      const answer = (status: number, body: unknown) => {
        req.status = status
        send(res, status, body)
      }
      if (req.headers.authorization !== expectedAuth) {
        return answer(401, { error: { code: "BAD_REQUEST_ERROR", description: "Authentication failed" } })
      }
      if (req.method !== "POST" || req.path !== "/v1/orders") {
        return answer(400, upiError("The requested URL was not found on the server."))
      }
      let input: Record<string, unknown>
      try {
        const parsed: unknown = JSON.parse(req.body)
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object")
        input = parsed as Record<string, unknown>
      } catch {
        return answer(400, upiError("The request body is not valid JSON"))
      }
      const amount = input.amount
      if (typeof amount !== "number" || !Number.isSafeInteger(amount)) return answer(400, upiError("The amount must be an integer.", "amount"))
      if (amount < UPI_MIN_AMOUNT) return answer(400, upiError("The amount must be atleast INR 1.00", "amount"))
      if (typeof input.currency !== "string" || !/^[A-Z]{3}$/.test(input.currency)) {
        return answer(400, upiError("The currency field is required.", "currency"))
      }
      const notes = input.notes
      if (notes !== undefined && (typeof notes !== "object" || notes === null || Array.isArray(notes))) {
        return answer(400, upiError("notes should be an object", "notes"))
      }
      const order: FakeUpiOrder = {
        id: rid("order_", 10),
        amount,
        currency: input.currency,
        receipt: typeof input.receipt === "string" ? input.receipt : null,
        notes: (notes as Record<string, unknown> | undefined) ?? {},
        status: "created",
      }
      orders.set(order.id, order)
      answer(200, { entity: "order", amount_paid: 0, amount_due: amount, attempts: 0, offer_id: null, created_at: nowSeconds(), ...order })
    },
    (status) => ({ error: { code: status >= 500 ? "SERVER_ERROR" : "BAD_REQUEST_ERROR", description: status === 429 ? "Too many requests" : "The server encountered an error" } }),
  )

  return {
    ...base,
    orders,
    async deliver(toUrl, orderId, opts = {}) {
      const order = orders.get(orderId)
      if (order !== undefined) order.status = "paid"
      const eventId = opts.eventId === undefined ? rid("", 10) : opts.eventId
      const entity = {
        id: rid("pay_", 10),
        entity: "payment",
        amount: order?.amount ?? 0,
        currency: "INR",
        status: "captured",
        order_id: orderId,
        method: "upi",
        captured: true,
        notes: order?.notes ?? {},
        created_at: nowSeconds(),
        ...opts.entity,
      }
      const payload = JSON.stringify({
        entity: "event",
        account_id: "acc_fake0000000001",
        event: opts.event ?? "payment.captured",
        contains: ["payment"],
        payload: { payment: { entity } },
        created_at: nowSeconds(),
      })
      const signature = opts.signature === undefined ? signGwUpi(payload, opts.secret ?? config.webhookSecret) : opts.signature
      const headers: Record<string, string> = {}
      // Hyphenated as the deployment's proxy forwards them (see gw_card above).
      if (signature !== null) headers["X-gw-upi-Signature"] = signature
      if (eventId !== null) headers["X-gw-upi-Event-Id"] = eventId
      return post(toUrl, payload, headers, eventId ?? String(entity.id))
    },
  }
}
