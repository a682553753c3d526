// Local stand-ins for the two payment gateways' APIs (node:http on 127.0.0.1:0) that record each
// request, check credentials, answer like the real APIs, inject failures and send signed webhooks;
// they keep the methods a checkout saved and charge them off-session (decline, async modes).
import { randomBytes } from "node:crypto"
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http"
import type { AddressInfo } from "node:net"
import { signGwCard, signGwUpi } from "../../src/providers/payments/signatures.js"

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
type Fault =
  | { kind: "fail"; status: number; body: unknown; headers: Record<string, string> }
  | { kind: "hang" }
  | { kind: "delay"; ms: number }

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

const rid = (prefix: string, bytes = 12): string =>
  `${prefix}${randomBytes(bytes).toString("base64url").replace(/[-_]/g, "x")}`

/** A node:http server on 127.0.0.1:0 running `handle` after recording the request and applying faults. */
async function startFake(
  handle: (req: RecordedRequest, res: ServerResponse) => void,
  errorBody: (status: number) => unknown,
) {
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
      for (let i = 0; i < times; i++)
        faults.push({ kind: "fail", status, body: options.body ?? errorBody(status), headers: options.headers ?? {} })
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

async function post(
  toUrl: string,
  payload: string,
  headers: Record<string, string>,
  eventId: string,
): Promise<Delivery> {
  const res = await fetch(toUrl, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: payload,
  })
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
  /** Set when the checkout asked to keep the card (payment_intent_data[setup_future_usage]). */
  setup_future_usage: string | null
  /** payment_intent_data[metadata]: what the session's PaymentIntent carries. */
  payment_intent_metadata: Record<string, string>
}

/** A card kept on a customer after a checkout with setup_future_usage=off_session. */
export interface FakeCardMethod {
  id: string
  customer: string
  brand: string
  last4: string
}

export interface FakeCardIntent {
  id: string
  amount: number
  currency: string
  customer: string | null
  payment_method: string | null
  metadata: Record<string, string>
  status: "processing" | "succeeded" | "requires_payment_method"
}

/** How off-session charges (saved methods) behave; shared by both fakes. */
export interface OffSessionControls {
  /** The next `times` off-session charges are declined. */
  declineNext(times?: number): void
  /**
   * Async mode: charges answer "processing" (card) / "created" (UPI), then the signed webhook with
   * the final outcome goes to the configured webhook URL after `delayMs`.
   */
  setAsync(on: boolean, delayMs?: number): void
  /** Where async webhooks go (the server's /billing/webhooks/<gateway>). */
  setWebhookUrl(url: string): void
  /** Every webhook the async mode sent, with the receiver's answer. */
  readonly asyncDeliveries: Delivery[]
}

function offSession(): OffSessionControls & {
  takeDecline(): boolean
  async: { on: boolean; delayMs: number }
  webhookUrl(): string
} {
  let declines = 0
  let hook = ""
  const async = { on: false, delayMs: 50 }
  return {
    declineNext(times = 1) {
      declines += times
    },
    setAsync(on, delayMs = 50) {
      async.on = on
      async.delayMs = delayMs
    },
    setWebhookUrl(url) {
      hook = url
    },
    asyncDeliveries: [],
    takeDecline() {
      if (declines <= 0) return false
      declines--
      return true
    },
    async,
    webhookUrl: () => hook,
  }
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

export interface FakeGwCard extends FakeBase, OffSessionControls {
  readonly sessions: Map<string, FakeCardSession>
  readonly methods: Map<string, FakeCardMethod>
  readonly paymentIntents: Map<string, FakeCardIntent>
  deliver(toUrl: string, sessionId: string, opts?: GwCardDeliverOptions): Promise<Delivery>
  /**
   * The payer completes the session: checkout.session.completed, then payment_intent.succeeded
   * for its PaymentIntent (naming the saved card when the session asked to keep it).
   */
  pay(
    toUrl: string,
    sessionId: string,
    card?: { brand?: string; last4?: string },
  ): Promise<{ session: Delivery; paymentIntent: Delivery; method: FakeCardMethod | undefined }>
  /** A signed payment_intent.* event for a PaymentIntent this fake holds. */
  deliverIntent(toUrl: string, piId: string, opts?: GwCardDeliverOptions): Promise<Delivery>
}

/** The card gateway's minimum charge (USD 0.50), as the real API enforces it. */
const CARD_MIN_AMOUNT = 50

export async function startFakeGwCard(config: { secretKey: string; webhookSecret: string }): Promise<FakeGwCard> {
  const sessions = new Map<string, FakeCardSession>()
  const methods = new Map<string, FakeCardMethod>()
  const paymentIntents = new Map<string, FakeCardIntent>()
  const sessionIntents = new Map<string, string>()
  const off = offSession()
  const idempotent = new Map<string, { body: string; status: number; answer: unknown }>()
  const cardError = (status: number, message: string, extra: Record<string, unknown> = {}) => ({
    error: {
      type: status === 401 ? "invalid_request_error" : status >= 500 ? "api_error" : "invalid_request_error",
      message,
      ...extra,
    },
  })
  let url = ""

  const signedPost = (
    toUrl: string,
    type: string,
    object: Record<string, unknown>,
    opts: GwCardDeliverOptions = {},
  ) => {
    const eventId = opts.eventId ?? rid("evt_1")
    const payload = JSON.stringify({
      id: eventId,
      object: "event",
      type: opts.type ?? type,
      created: nowSeconds(),
      livemode: false,
      data: { object: { ...object, ...opts.object } },
    })
    const signature =
      opts.signature === undefined
        ? signGwCard(payload, opts.secret ?? config.webhookSecret, opts.timestamp ?? nowSeconds())
        : opts.signature
    // The gateway sends gw_card-Signature; our HTTP engine drops underscore header names, so the
    // deployment's proxy forwards it hyphenated (README), and so does this fake.
    return post(toUrl, payload, signature === null ? {} : { "gw_card-Signature": signature }, eventId)
  }
  const intentObject = (pi: FakeCardIntent) => {
    const method = pi.payment_method === null ? undefined : methods.get(pi.payment_method)
    return {
      object: "payment_intent",
      ...pi,
      amount_received: pi.status === "succeeded" ? pi.amount : 0,
      ...(method !== undefined && {
        payment_method_details: { type: "card", card: { brand: method.brand, last4: method.last4 } },
      }),
    }
  }

  /** POST /v1/payment_intents with confirm=true and off_session=true: a charge of a saved card. */
  function createPaymentIntent(form: URLSearchParams, answer: (status: number, body: unknown) => void): void {
    const missing = ["amount", "currency", "customer", "payment_method"].find((k) => (form.get(k) ?? "") === "")
    if (missing !== undefined)
      return answer(
        400,
        cardError(400, `Missing required param: ${missing}.`, { code: "parameter_missing", param: missing }),
      )
    if (form.get("confirm") !== "true" || form.get("off_session") !== "true")
      return answer(400, cardError(400, "This fake only confirms off-session charges."))
    const amount = Number(form.get("amount"))
    if (!Number.isSafeInteger(amount) || amount < CARD_MIN_AMOUNT)
      return answer(
        400,
        cardError(400, "Amount must be at least $0.50 usd", { code: "amount_too_small", param: "amount" }),
      )
    const method = methods.get(form.get("payment_method")!)
    if (method === undefined || method.customer !== form.get("customer")) {
      return answer(
        400,
        cardError(400, `No such PaymentMethod: '${form.get("payment_method")}'`, {
          code: "resource_missing",
          param: "payment_method",
        }),
      )
    }
    const metadata: Record<string, string> = {}
    for (const [k, v] of form) {
      const m = /^metadata\[(.+)\]$/.exec(k)
      if (m?.[1] !== undefined) metadata[m[1]] = v
    }
    const pi: FakeCardIntent = {
      id: rid("pi_"),
      amount,
      currency: form.get("currency")!,
      customer: method.customer,
      payment_method: method.id,
      metadata,
      status: "processing",
    }
    paymentIntents.set(pi.id, pi)
    const declined = off.takeDecline()
    if (declined && !off.async.on) {
      pi.status = "requires_payment_method"
      return answer(402, {
        error: {
          type: "card_error",
          code: "card_declined",
          decline_code: "insufficient_funds",
          message: "Your card has insufficient funds.",
          payment_intent: intentObject(pi),
        },
      })
    }
    if (!off.async.on) {
      pi.status = "succeeded"
      return answer(200, intentObject(pi))
    }
    answer(200, intentObject(pi))
    // The final word comes later, by webhook only.
    const timer = setTimeout(() => {
      pi.status = declined ? "requires_payment_method" : "succeeded"
      const type = declined ? "payment_intent.payment_failed" : "payment_intent.succeeded"
      void signedPost(off.webhookUrl(), type, intentObject(pi)).then(
        (d) => off.asyncDeliveries.push(d),
        () => {},
      )
    }, off.async.delayMs)
    timer.unref()
  }

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
        return answer(
          401,
          cardError(401, `Invalid API Key provided: ${given === "" ? "(none)" : `****${given.slice(-4)}`}`),
        )
      }
      if (req.method !== "POST" || (req.path !== "/v1/checkout/sessions" && req.path !== "/v1/payment_intents")) {
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
            return answer(
              400,
              cardError(
                400,
                "Keys for idempotent requests can only be used with the same parameters they were first used with.",
                { type: "idempotency_error" },
              ),
            )
          }
          return answer(seen.status, seen.answer)
        }
      }
      const form = new URLSearchParams(req.body)
      if (req.path === "/v1/payment_intents") {
        const rememberPi = (status: number, body: unknown) => {
          if (typeof key === "string") idempotent.set(key, { body: req.body, status, answer: body })
          answer(status, body)
        }
        return createPaymentIntent(form, rememberPi)
      }
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
      if (missing !== undefined)
        return remember(
          400,
          cardError(400, `Missing required param: ${missing}.`, { code: "parameter_missing", param: missing }),
        )
      if (form.get("mode") !== "payment") return remember(400, cardError(400, "Invalid mode.", { param: "mode" }))
      const unit = Number(form.get("line_items[0][price_data][unit_amount]"))
      const quantity = Number(form.get("line_items[0][quantity]"))
      if (!Number.isSafeInteger(unit) || unit < 0 || !Number.isSafeInteger(quantity) || quantity < 1) {
        return remember(400, cardError(400, "Invalid integer.", { param: "line_items[0][price_data][unit_amount]" }))
      }
      if (unit * quantity < CARD_MIN_AMOUNT) {
        return remember(
          400,
          cardError(400, "The Checkout Session's total amount due must add up to at least $0.50 usd", {
            code: "amount_too_small",
          }),
        )
      }
      const metadata: Record<string, string> = {}
      for (const [k, v] of form) {
        const m = /^metadata\[(.+)\]$/.exec(k)
        if (m?.[1] !== undefined) metadata[m[1]] = v
      }
      const piMetadata: Record<string, string> = {}
      for (const [k, v] of form) {
        const m = /^payment_intent_data\[metadata\]\[(.+)\]$/.exec(k)
        if (m?.[1] !== undefined) piMetadata[m[1]] = v
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
        setup_future_usage: form.get("payment_intent_data[setup_future_usage]"),
        payment_intent_metadata: piMetadata,
      }
      sessions.set(id, session)
      remember(200, { object: "checkout.session", mode: "payment", livemode: false, created: nowSeconds(), ...session })
    },
    (status) =>
      cardError(
        status,
        status === 429 ? "Too many requests" : status >= 500 ? "An unknown error occurred" : "Request failed",
      ),
  )
  url = base.url

  const fake: FakeGwCard = {
    ...base,
    sessions,
    methods,
    paymentIntents,
    declineNext: off.declineNext,
    setAsync: off.setAsync,
    setWebhookUrl: off.setWebhookUrl,
    asyncDeliveries: off.asyncDeliveries,
    async deliver(toUrl, sessionId, opts = {}) {
      const session = sessions.get(sessionId)
      if (session !== undefined) {
        session.payment_status = "paid"
        session.status = "complete"
      }
      const object = {
        object: "checkout.session",
        id: sessionId,
        amount_total: session?.amount_total ?? 0,
        currency: session?.currency ?? "usd",
        payment_status: "paid",
        status: "complete",
        client_reference_id: session?.client_reference_id ?? null,
        metadata: session?.metadata ?? {},
        payment_intent: sessionIntents.get(sessionId) ?? rid("pi_"),
      }
      return signedPost(toUrl, "checkout.session.completed", object, opts)
    },
    async pay(toUrl, sessionId, card = {}) {
      const session = sessions.get(sessionId)
      if (session === undefined) throw new Error(`no session ${sessionId}`)
      let method: FakeCardMethod | undefined
      if (session.setup_future_usage === "off_session") {
        method = { id: rid("pm_"), customer: rid("cus_"), brand: card.brand ?? "visa", last4: card.last4 ?? "4242" }
        methods.set(method.id, method)
      }
      const pi: FakeCardIntent = {
        id: rid("pi_"),
        amount: session.amount_total,
        currency: session.currency,
        customer: method?.customer ?? null,
        payment_method: method?.id ?? rid("pm_"),
        metadata: session.payment_intent_metadata,
        status: "succeeded",
      }
      paymentIntents.set(pi.id, pi)
      sessionIntents.set(sessionId, pi.id)
      const sessionDelivery = await fake.deliver(toUrl, sessionId, { object: { customer: method?.customer ?? null } })
      const paymentIntent = await signedPost(toUrl, "payment_intent.succeeded", intentObject(pi))
      return { session: sessionDelivery, paymentIntent, method }
    },
    async deliverIntent(toUrl, piId, opts = {}) {
      const pi = paymentIntents.get(piId)
      if (pi === undefined) throw new Error(`no payment intent ${piId}`)
      return signedPost(toUrl, "payment_intent.succeeded", intentObject(pi), opts)
    },
  }
  return fake
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
  /** Orders created to save the method: the customer and the recurring token request. */
  customer_id: string | null
  wants_token: boolean
}

/** A recurring token the payer granted on an order created with customer_id and token. */
export interface FakeUpiToken {
  id: string
  customer_id: string
  vpa: string
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

export interface FakeGwUpi extends FakeBase, OffSessionControls {
  readonly orders: Map<string, FakeUpiOrder>
  readonly tokens: Map<string, FakeUpiToken>
  /** A signed payment.captured for the order; an order that asked for a token grants one (token_id, customer_id). */
  deliver(toUrl: string, orderId: string, opts?: GwUpiDeliverOptions): Promise<Delivery>
}

/** The UPI gateway's minimum order (INR 1.00), as the real API enforces it. */
const UPI_MIN_AMOUNT = 100

export async function startFakeGwUpi(config: {
  keyId: string
  keySecret: string
  webhookSecret: string
}): Promise<FakeGwUpi> {
  const orders = new Map<string, FakeUpiOrder>()
  const tokens = new Map<string, FakeUpiToken>()
  const customers = new Set<string>()
  const off = offSession()
  const upiError = (description: string, field?: string) => ({
    error: {
      code: "BAD_REQUEST_ERROR",
      description,
      source: "business",
      step: "payment_initiation",
      reason: "input_validation_failed",
      ...(field !== undefined && { field }),
    },
  })
  const expectedAuth = `Basic ${Buffer.from(`${config.keyId}:${config.keySecret}`).toString("base64")}`

  const signedPost = (
    toUrl: string,
    event: string,
    entity: Record<string, unknown>,
    opts: GwUpiDeliverOptions = {},
  ) => {
    const eventId = opts.eventId === undefined ? rid("", 10) : opts.eventId
    const full = { ...entity, ...opts.entity }
    const payload = JSON.stringify({
      entity: "event",
      account_id: "acc_fake0000000001",
      event: opts.event ?? event,
      contains: ["payment"],
      payload: { payment: { entity: full } },
      created_at: nowSeconds(),
    })
    const signature =
      opts.signature === undefined ? signGwUpi(payload, opts.secret ?? config.webhookSecret) : opts.signature
    const headers: Record<string, string> = {}
    // Hyphenated as the deployment's proxy forwards them (see gw_card above).
    if (signature !== null) headers["X-gw_upi-Signature"] = signature
    if (eventId !== null) headers["X-gw_upi-Event-Id"] = eventId
    return post(toUrl, payload, headers, eventId ?? String(full.id))
  }
  const paymentEntity = (order: FakeUpiOrder, status: string, extra: Record<string, unknown> = {}) => ({
    id: rid("pay_", 10),
    entity: "payment",
    amount: order.amount,
    currency: order.currency,
    status,
    order_id: order.id,
    method: "upi",
    captured: status === "captured",
    notes: order.notes,
    created_at: nowSeconds(),
    ...extra,
  })

  /** A captured payment for an order this fake never created (tests of unknown intents). */
  const paymentEntityFor = (orderId: string) => ({
    id: rid("pay_", 10),
    entity: "payment",
    amount: 0,
    currency: "INR",
    status: "captured",
    order_id: orderId,
    method: "upi",
    captured: true,
    notes: {},
    created_at: nowSeconds(),
  })

  /** POST /v1/payments/create/recurring: a payment of an order on a saved token, without the payer. */
  function recurring(input: Record<string, unknown>, answer: (status: number, body: unknown) => void): void {
    const order = typeof input.order_id === "string" ? orders.get(input.order_id) : undefined
    if (order === undefined) return answer(400, upiError("The id provided does not exist", "order_id"))
    if (order.status === "paid") return answer(400, upiError("Order has already been paid", "order_id"))
    const token = typeof input.token === "string" ? tokens.get(input.token) : undefined
    if (token === undefined || token.customer_id !== input.customer_id)
      return answer(400, upiError("The token provided does not exist", "token"))
    if (input.amount !== order.amount) return answer(400, upiError("The amount must match the order amount", "amount"))
    if (input.recurring !== "1" && input.recurring !== 1)
      return answer(400, upiError("recurring is required", "recurring"))
    const declined = off.takeDecline()
    const extra = { customer_id: token.customer_id, token_id: token.id, vpa: token.vpa, recurring: true }
    if (!off.async.on) {
      if (declined)
        return answer(
          200,
          paymentEntity(order, "failed", {
            ...extra,
            error_code: "BAD_REQUEST_ERROR",
            error_description: "Payment declined by the payer's bank",
          }),
        )
      order.status = "paid"
      return answer(200, paymentEntity(order, "captured", extra))
    }
    order.status = "attempted"
    const pending = paymentEntity(order, "created", extra)
    answer(200, pending)
    const timer = setTimeout(() => {
      if (!declined) order.status = "paid"
      const entity = { ...pending, status: declined ? "failed" : "captured", captured: !declined }
      void signedPost(off.webhookUrl(), declined ? "payment.failed" : "payment.captured", entity).then(
        (d) => off.asyncDeliveries.push(d),
        () => {},
      )
    }, off.async.delayMs)
    timer.unref()
  }

  const base = await startFake(
    (req, res) => {
      const answer = (status: number, body: unknown) => {
        req.status = status
        send(res, status, body)
      }
      if (req.headers.authorization !== expectedAuth) {
        return answer(401, { error: { code: "BAD_REQUEST_ERROR", description: "Authentication failed" } })
      }
      const paths = ["/v1/orders", "/v1/customers", "/v1/payments/create/recurring"]
      if (req.method !== "POST" || !paths.includes(req.path)) {
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
      if (req.path === "/v1/customers") {
        const id = rid("cust_", 10)
        customers.add(id)
        return answer(200, {
          id,
          entity: "customer",
          name: input.name ?? null,
          notes: input.notes ?? {},
          created_at: nowSeconds(),
        })
      }
      if (req.path === "/v1/payments/create/recurring") return recurring(input, answer)
      const amount = input.amount
      if (typeof amount !== "number" || !Number.isSafeInteger(amount))
        return answer(400, upiError("The amount must be an integer.", "amount"))
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
        customer_id:
          typeof input.customer_id === "string" && customers.has(input.customer_id) ? input.customer_id : null,
        wants_token: typeof input.token === "object" && input.token !== null,
      }
      if (input.customer_id !== undefined && order.customer_id === null)
        return answer(400, upiError("The id provided does not exist", "customer_id"))
      orders.set(order.id, order)
      answer(200, {
        entity: "order",
        amount_paid: 0,
        amount_due: amount,
        attempts: 0,
        offer_id: null,
        created_at: nowSeconds(),
        ...order,
      })
    },
    (status) => ({
      error: {
        code: status >= 500 ? "SERVER_ERROR" : "BAD_REQUEST_ERROR",
        description: status === 429 ? "Too many requests" : "The server encountered an error",
      },
    }),
  )

  return {
    ...base,
    orders,
    tokens,
    declineNext: off.declineNext,
    setAsync: off.setAsync,
    setWebhookUrl: off.setWebhookUrl,
    asyncDeliveries: off.asyncDeliveries,
    async deliver(toUrl, orderId, opts = {}) {
      const order = orders.get(orderId)
      if (order !== undefined) order.status = "paid"
      let extra: Record<string, unknown> = {}
      if (order?.customer_id != null && order.wants_token) {
        const token: FakeUpiToken = { id: rid("token_", 10), customer_id: order.customer_id, vpa: "payer.name@okbank" }
        tokens.set(token.id, token)
        extra = { customer_id: token.customer_id, token_id: token.id, vpa: token.vpa }
      }
      const entity =
        order === undefined ? { ...paymentEntityFor(orderId), ...extra } : paymentEntity(order, "captured", extra)
      return signedPost(toUrl, "payment.captured", entity, opts)
    },
  }
}

/** Both fake gateways, and the server environment that points the real adapters at them. */
export async function startFakeGateways(): Promise<{
  card: FakeGwCard
  upi: FakeGwUpi
  env: Record<string, string>
  close(): Promise<void>
}> {
  const card = await startFakeGwCard({ secretKey: "sk_test_card", webhookSecret: "whsec_card" })
  const upi = await startFakeGwUpi({ keyId: "key_upi", keySecret: "upi_secret", webhookSecret: "whsec_upi" })
  const env = {
    GW_CARD_API_URL: card.url,
    GW_CARD_SECRET_KEY: "sk_test_card",
    GW_CARD_WEBHOOK_SECRET: "whsec_card",
    GW_UPI_API_URL: upi.url,
    GW_UPI_KEY_ID: "key_upi",
    GW_UPI_KEY_SECRET: "upi_secret",
    GW_UPI_WEBHOOK_SECRET: "whsec_upi",
  }
  return { card, upi, env, close: async () => void (await Promise.all([card.close(), upi.close()])) }
}
