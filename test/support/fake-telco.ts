// A local stand-in for telco_a's REST API (node:http on 127.0.0.1:0): accounts with sid and auth
// token (HTTP Basic), numbers for sale and numbers owned, failure injection, and signed callbacks
// to our webhooks. Other resources (calls, …) plug in through `handle` without changing this file.
import { createHmac, randomBytes } from "node:crypto"
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http"
import type { AddressInfo } from "node:net"
import { parsePhoneNumberFromString } from "libphonenumber-js/max"

const API = "/2010-04-01/Accounts"

export interface FakeTelcoAccount {
  readonly sid: string
  readonly token: string
}

export interface TelcoRequest {
  readonly method: string
  /** Path and query as sent, e.g. /2010-04-01/Accounts/AC…/IncomingPhoneNumbers.json?PhoneNumber=%2B1… */
  readonly path: string
  /** The path below /2010-04-01/Accounts/{sid}, without the query. */
  readonly resource: string
  readonly query: Record<string, string>
  /** The form-encoded body, decoded. */
  readonly form: Record<string, string>
  readonly headers: IncomingHttpHeaders
  readonly body: string
  /** The account the Basic credentials named (whether or not they were right). */
  readonly accountSid: string | undefined
  /** The status the fake answered (0 while it has not, or when it never did). */
  status: number
}

export interface FakeOffer {
  phone_number: string
  friendly_name: string
  iso_country: string
  region: string | null
  locality: string | null
  capabilities: { voice: boolean; SMS: boolean; MMS: boolean }
}

export interface FakeIncomingNumber {
  sid: string
  account_sid: string
  phone_number: string
  friendly_name: string
  voice_url: string
  voice_method: string
  status_callback: string
  status_callback_method: string
  capabilities: { voice: boolean; sms: boolean; mms: boolean }
  date_created: string
}

/** What a custom handler sees: the request, with the account already authenticated. */
export interface HandlerContext {
  readonly req: TelcoRequest
  readonly account: FakeTelcoAccount
  /** Parameters of the handler's pattern (named groups). */
  readonly params: Record<string, string>
}

export type HandlerAnswer = { status: number; body?: unknown }

type Fault =
  | { kind: "fail"; status: number; body: unknown; headers: Record<string, string> }
  | { kind: "hang" }
  | { kind: "delay"; ms: number }

export interface FakeTelco {
  /** Base URL to configure as the telco_a API root (no trailing slash). */
  readonly url: string
  readonly requests: TelcoRequest[]
  readonly accounts: Map<string, FakeTelcoAccount>
  /** Numbers for sale, by country (upper case). A country with no entry answers 404, as telco_a does. */
  readonly offers: Map<string, FakeOffer[]>
  /** Numbers owned by any account, by sid. */
  readonly numbers: Map<string, FakeIncomingNumber>
  /** Numbers given back (DELETE), in order. */
  readonly released: FakeIncomingNumber[]
  /** A new account (random sid and token unless given). */
  addAccount(account?: Partial<FakeTelcoAccount>): FakeTelcoAccount
  /** Replaces the numbers for sale in `country`. */
  stock(country: string, phones: ReadonlyArray<string | (Partial<FakeOffer> & { phone_number: string })>): void
  /** Gives `accountSid` a number it owns already (as if bought elsewhere): import tests. */
  own(accountSid: string, phone: string, fields?: Partial<FakeIncomingNumber>): FakeIncomingNumber
  /** The owned number with this E.164, on any account. */
  ownedByPhone(phone: string): FakeIncomingNumber | undefined
  /**
   * Serves `method` on paths below /2010-04-01/Accounts/{sid} matching `pattern` (named groups
   * become params), after authentication; checked before the built-in resources.
   */
  handle(
    method: string,
    pattern: RegExp,
    handler: (ctx: HandlerContext) => HandlerAnswer | Promise<HandlerAnswer>,
  ): void
  /** The next `times` requests are answered with `status` (a telco-shaped error body unless given). */
  failNext(status: number, times?: number, options?: { body?: unknown; headers?: Record<string, string> }): void
  /** The next `times` requests are never answered (client timeouts). */
  hangNext(times?: number): void
  /** The next `times` requests are processed at once but answered only after `ms` (a timeout after success). */
  delayNext(ms: number, times?: number): void
  /** Sends a callback to one of our webhooks as telco_a does, signed with `token` (or the given signature). */
  callback(
    url: string,
    params: Record<string, string>,
    opts: { token: string; method?: "POST" | "GET"; signature?: string | null },
  ): Promise<Response>
  /** Forgets requests and pending faults (not accounts or numbers). */
  reset(): void
  close(): Promise<void>
}

/**
 * X-telco_a-Signature: base64 HMAC-SHA1(auth token, the full URL + every POST parameter's name
 * and value, sorted by name in code-unit order); a GET callback signs the URL alone.
 */
export function signTelcoA(token: string, url: string, params: Record<string, string> = {}): string {
  const names = Object.keys(params).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  const data = url + names.map((n) => n + params[n]).join("")
  return createHmac("sha1", token).update(data, "utf8").digest("base64")
}

const hex = (bytes: number) => randomBytes(bytes).toString("hex")
const telcoError = (status: number, code: number, message: string) => ({
  code,
  message,
  more_info: `https://telco-a.example/docs/errors/${code}`,
  status,
})
const defaultError = (status: number) =>
  status === 401
    ? telcoError(401, 20003, "Authenticate")
    : status === 429
      ? telcoError(429, 20429, "Too Many Requests")
      : telcoError(status, 20500, `fake telco_a failure ${status}`)

function offerOf(input: string | (Partial<FakeOffer> & { phone_number: string }), country: string): FakeOffer {
  const o = typeof input === "string" ? { phone_number: input } : input
  return {
    friendly_name: o.phone_number,
    iso_country: country,
    region: null,
    locality: null,
    capabilities: { voice: true, SMS: true, MMS: false },
    ...o,
  }
}

export async function startFakeTelco(
  opts: { accounts?: ReadonlyArray<Partial<FakeTelcoAccount>> } = {},
): Promise<FakeTelco> {
  const requests: TelcoRequest[] = []
  const faults: Fault[] = []
  const timers = new Set<NodeJS.Timeout>()
  const accounts = new Map<string, FakeTelcoAccount>()
  const offers = new Map<string, FakeOffer[]>()
  const numbers = new Map<string, FakeIncomingNumber>()
  const released: FakeIncomingNumber[] = []
  const custom: Array<{
    method: string
    pattern: RegExp
    handler: (ctx: HandlerContext) => HandlerAnswer | Promise<HandlerAnswer>
  }> = []
  let url = ""

  // Default stock: US numbers in two area codes.
  offers.set("US", [
    ...Array.from({ length: 30 }, (_, i) =>
      offerOf(
        { phone_number: `+1415555${String(200 + i).padStart(4, "0")}`, region: "CA", locality: "San Francisco" },
        "US",
      ),
    ),
    ...Array.from({ length: 30 }, (_, i) =>
      offerOf(
        { phone_number: `+1212555${String(200 + i).padStart(4, "0")}`, region: "NY", locality: "New York" },
        "US",
      ),
    ),
  ])

  const resourceOf = (n: FakeIncomingNumber) => ({
    ...n,
    uri: `${API}/${n.account_sid}/IncomingPhoneNumbers/${n.sid}.json`,
  })

  function applyWebhooks(n: FakeIncomingNumber, form: Record<string, string>): void {
    if ("VoiceUrl" in form) n.voice_url = form.VoiceUrl!
    if ("VoiceMethod" in form) n.voice_method = form.VoiceMethod!
    if ("StatusCallback" in form) n.status_callback = form.StatusCallback!
    if ("StatusCallbackMethod" in form) n.status_callback_method = form.StatusCallbackMethod!
    if ("FriendlyName" in form) n.friendly_name = form.FriendlyName!
  }

  function newNumber(accountSid: string, phone: string, fields: Partial<FakeIncomingNumber> = {}): FakeIncomingNumber {
    const n: FakeIncomingNumber = {
      sid: `PN${hex(16)}`,
      account_sid: accountSid,
      phone_number: phone,
      friendly_name: phone,
      voice_url: "",
      voice_method: "POST",
      status_callback: "",
      status_callback_method: "POST",
      capabilities: { voice: true, sms: true, mms: false },
      date_created: new Date().toUTCString(),
      ...fields,
    }
    numbers.set(n.sid, n)
    return n
  }

  /** The built-in resources: numbers for sale and numbers owned. */
  function builtIn(req: TelcoRequest, account: FakeTelcoAccount): HandlerAnswer {
    const r = req.resource
    let m: RegExpExecArray | null
    if (req.method === "GET" && (m = /^\/AvailablePhoneNumbers\/([A-Za-z]+)\/Local\.json$/.exec(r))) {
      const country = m[1]!.toUpperCase()
      const stock = offers.get(country)
      if (stock === undefined)
        return { status: 404, body: telcoError(404, 20404, `The requested resource ${r} was not found`) }
      const area = req.query.AreaCode
      const size = Math.max(1, Math.min(1000, Number(req.query.PageSize ?? 50) || 50))
      const matching = stock.filter(
        (o) =>
          area === undefined || (parsePhoneNumberFromString(o.phone_number)?.nationalNumber ?? "").startsWith(area),
      )
      return { status: 200, body: { available_phone_numbers: matching.slice(0, size), uri: req.path } }
    }
    if (r === "/IncomingPhoneNumbers.json" && req.method === "GET") {
      const phone = req.query.PhoneNumber
      const owned = [...numbers.values()].filter(
        (n) => n.account_sid === account.sid && (phone === undefined || n.phone_number === phone),
      )
      return {
        status: 200,
        body: { incoming_phone_numbers: owned.map(resourceOf), page: 0, page_size: 50, uri: req.path },
      }
    }
    if (r === "/IncomingPhoneNumbers.json" && req.method === "POST") {
      const phone = req.form.PhoneNumber
      if (phone === undefined || phone === "")
        return { status: 400, body: telcoError(400, 21421, "PhoneNumber is required") }
      const country = [...offers.entries()].find(([, list]) => list.some((o) => o.phone_number === phone))
      if (country === undefined || [...numbers.values()].some((n) => n.phone_number === phone))
        return { status: 400, body: telcoError(400, 21422, `PhoneNumber ${phone} is not available`) }
      offers.set(
        country[0],
        country[1].filter((o) => o.phone_number !== phone),
      )
      const n = newNumber(account.sid, phone)
      applyWebhooks(n, req.form)
      return { status: 201, body: resourceOf(n) }
    }
    if ((m = /^\/IncomingPhoneNumbers\/(PN[0-9a-zA-Z]+)\.json$/.exec(r))) {
      const n = numbers.get(m[1]!)
      if (n === undefined || n.account_sid !== account.sid)
        return { status: 404, body: telcoError(404, 20404, `The requested resource ${r} was not found`) }
      if (req.method === "GET") return { status: 200, body: resourceOf(n) }
      if (req.method === "POST") {
        applyWebhooks(n, req.form)
        return { status: 200, body: resourceOf(n) }
      }
      if (req.method === "DELETE") {
        numbers.delete(n.sid)
        released.push(n)
        return { status: 204 }
      }
    }
    return { status: 404, body: telcoError(404, 20404, `The requested resource ${r} was not found`) }
  }

  function answer(
    res: ServerResponse,
    req: TelcoRequest,
    a: HandlerAnswer,
    headers: Record<string, string> = {},
  ): void {
    req.status = a.status
    if (a.status === 204 || a.body === undefined) {
      res.writeHead(a.status, headers)
      res.end()
      return
    }
    res.writeHead(a.status, { "content-type": "application/json", ...headers })
    res.end(JSON.stringify(a.body))
  }

  async function route(req: TelcoRequest): Promise<HandlerAnswer> {
    // The account itself is /Accounts/{sid}.json; its resources are below /Accounts/{sid}/.
    const m = /^\/2010-04-01\/Accounts\/([^/?]+?)(?:\.json)?(?=[/?]|$)/.exec(req.path)
    const auth = /^Basic (.+)$/i.exec(req.headers.authorization ?? "")
    const [user, ...rest] = auth ? Buffer.from(auth[1]!, "base64").toString("utf8").split(":") : []
    const account = user === undefined ? undefined : accounts.get(user)
    if (account === undefined || account.token !== rest.join(":"))
      return { status: 401, body: telcoError(401, 20003, "Authenticate") }
    if (m === null || decodeURIComponent(m[1]!) !== account.sid)
      return { status: 403, body: telcoError(403, 20003, "the credentials do not belong to this account") }
    if (req.method === "GET" && /^\/2010-04-01\/Accounts\/[^/?]+\.json$/.test(req.path.split("?")[0]!))
      return {
        status: 200,
        body: { sid: account.sid, friendly_name: `Account ${account.sid}`, status: "active", type: "Full" },
      }
    for (const c of custom) {
      const hit = c.method === req.method ? c.pattern.exec(req.resource) : null
      if (hit) return c.handler({ req, account, params: { ...hit.groups } })
    }
    return builtIn(req, account)
  }

  const server: Server = createServer((incoming: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    incoming.on("data", (c: Buffer) => chunks.push(c))
    incoming.on("end", () => {
      const path = incoming.url ?? ""
      const u = new URL(path, "http://fake")
      const body = Buffer.concat(chunks).toString("utf8")
      const isForm = (incoming.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")
      const auth = /^Basic (.+)$/i.exec(incoming.headers.authorization ?? "")
      const req: TelcoRequest = {
        method: incoming.method ?? "",
        path,
        resource: u.pathname.replace(/^\/2010-04-01\/Accounts\/[^/]+?(?:\.json)?(?=\/|$)/, ""),
        query: Object.fromEntries(u.searchParams),
        form: isForm ? Object.fromEntries(new URLSearchParams(body)) : {},
        headers: incoming.headers,
        body,
        accountSid: auth ? Buffer.from(auth[1]!, "base64").toString("utf8").split(":")[0] : undefined,
        status: 0,
      }
      requests.push(req)
      const fault = faults.shift()
      if (fault?.kind === "hang") return
      if (fault?.kind === "fail") return answer(res, req, { status: fault.status, body: fault.body }, fault.headers)
      void route(req).then(
        (a) => {
          if (fault?.kind !== "delay") return answer(res, req, a)
          // Processed now, answered later: the client may have given up by then.
          const timer = setTimeout(() => {
            timers.delete(timer)
            if (!res.destroyed) answer(res, req, a)
          }, fault.ms)
          timers.add(timer)
        },
        (e: unknown) => answer(res, req, { status: 500, body: telcoError(500, 20500, String(e)) }),
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const fake: FakeTelco = {
    url,
    requests,
    accounts,
    offers,
    numbers,
    released,
    addAccount(a = {}) {
      const account = { sid: a.sid ?? `AC${hex(16)}`, token: a.token ?? hex(16) }
      accounts.set(account.sid, account)
      return account
    },
    stock(country, phones) {
      const c = country.toUpperCase()
      offers.set(
        c,
        phones.map((p) => offerOf(p, c)),
      )
    },
    own(accountSid, phone, fields) {
      return newNumber(accountSid, phone, fields)
    },
    ownedByPhone(phone) {
      return [...numbers.values()].find((n) => n.phone_number === phone)
    },
    handle(method, pattern, handler) {
      custom.push({ method: method.toUpperCase(), pattern, handler })
    },
    failNext(status, times = 1, options = {}) {
      for (let i = 0; i < times; i++)
        faults.push({
          kind: "fail",
          status,
          body: options.body ?? defaultError(status),
          headers: options.headers ?? {},
        })
    },
    hangNext(times = 1) {
      for (let i = 0; i < times; i++) faults.push({ kind: "hang" })
    },
    delayNext(ms, times = 1) {
      for (let i = 0; i < times; i++) faults.push({ kind: "delay", ms })
    },
    async callback(to, params, o) {
      const method = o.method ?? "POST"
      const signed =
        method === "GET" ? `${to}${to.includes("?") ? "&" : "?"}${new URLSearchParams(params).toString()}` : to
      const signature =
        o.signature === undefined ? signTelcoA(o.token, signed, method === "GET" ? {} : params) : o.signature
      return fetch(method === "GET" ? signed : to, {
        method,
        headers: {
          ...(method === "POST" && { "content-type": "application/x-www-form-urlencoded" }),
          // The spec names X-telco_a-Signature; the HTTP engine drops underscore header names, so the
          // hyphenated form is what reaches us (README: the proxy maps one to the other).
          ...(signature !== null && { "X-telco_a-Signature": signature }),
        },
        ...(method === "POST" && { body: new URLSearchParams(params).toString() }),
      })
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
  for (const a of opts.accounts ?? []) fake.addAccount(a)
  return fake
}
