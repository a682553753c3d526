// telco_a's REST API for phone numbers (its 2010-04-01 API: form-encoded requests, JSON answers,
// HTTP Basic account sid and auth token): search, buy with our webhooks, take over, release.
// telcoARequest is the account-scoped call with timeouts and retries; the calls adapter reuses it.
import { Buffer } from "node:buffer"
import { type Attempt, ProviderCallError, parseJsonObject, withRetries } from "../http.util.js"
import { type Outbound, PLATFORM_DEFAULT, retryableStatus, vendorAttempt } from "../outbound.js"
import {
  type AvailableNumber,
  type NumberInventory,
  NumberInventoryError,
  type NumberSearch,
  type NumberWebhooks,
} from "./numbers.interface.js"

/** One telco_a account: the platform's, or a byok workspace's own. */
export interface TelcoAAccount {
  /** API root without the version, e.g. https://api.telco-a.example. */
  readonly apiUrl: string
  readonly accountSid: string
  readonly authToken: string
}

export interface TelcoAOptions {
  /** Limit for each attempt (connect, request and response body); default 10000 ms. */
  readonly timeoutMs?: number
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch
  /** The address guard (a tenant's API root) and answer size cap; default: no guard, 2 MiB. */
  readonly outbound?: Outbound
}

/** A telco_a answer other than 2xx, or no answer; `code` is telco_a's own error code when it gave one. */
export class TelcoAApiError extends ProviderCallError {
  override readonly name = "TelcoAApiError"
  constructor(
    message: string,
    retryable: boolean,
    readonly code: number | undefined,
    options?: { cause?: unknown; status?: number },
  ) {
    super(message, retryable, options)
  }
}

export interface TelcoARequest {
  readonly method: "GET" | "POST" | "DELETE"
  /** Below /2010-04-01/Accounts/{sid}, e.g. /IncomingPhoneNumbers.json. */
  readonly path: string
  readonly query?: Readonly<Record<string, string>>
  /** Sent form-encoded (POST). */
  readonly form?: Readonly<Record<string, string>>
}

const ERROR_DETAIL_CHARS = 200

const trimSlash = (s: string): string => s.replace(/\/+$/, "")

/**
 * One call against the account, retried (up to 3 attempts) on no answer, timeouts, 429 and 5xx.
 * Resolves with the status and the JSON object answered (empty for 204); rejects with
 * TelcoAApiError. The auth token never appears in an error message.
 */
export async function telcoARequest(
  account: TelcoAAccount,
  req: TelcoARequest,
  opts: TelcoAOptions = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const timeoutMs = opts.timeoutMs ?? 10_000
  const outbound = opts.outbound ?? PLATFORM_DEFAULT
  const basic = Buffer.from(`${account.accountSid}:${account.authToken}`, "utf8").toString("base64")
  const scrub = (s: string): string =>
    [account.authToken, basic].filter((x) => x !== "").reduce((acc, secret) => acc.split(secret).join("***"), s)
  const query = req.query === undefined ? "" : `?${new URLSearchParams(req.query).toString()}`
  const url =
    `${trimSlash(account.apiUrl)}/2010-04-01/Accounts/${encodeURIComponent(account.accountSid)}` + `${req.path}${query}`
  const what = `telco_a ${req.method} ${req.path}`

  const attempt = (): Promise<Attempt<{ status: number; body: Record<string, unknown> }, TelcoAApiError>> =>
    vendorAttempt({
      url,
      init: {
        method: req.method,
        headers: {
          accept: "application/json",
          authorization: `Basic ${basic}`,
          ...(req.form !== undefined && { "content-type": "application/x-www-form-urlencoded" }),
        },
        ...(req.form !== undefined && { body: new URLSearchParams(req.form).toString() }),
      },
      timeoutMs,
      outbound,
      fetch: opts.fetch,
      unreachable: (f) =>
        new TelcoAApiError(
          `${what}: ${scrub(f.message)}`,
          f.retryable,
          undefined,
          f.status === undefined ? undefined : { status: f.status },
        ),
      answered: ({ status, text }) => {
        const body = parseJsonObject(text)
        if (body !== undefined || text.trim() === "") return { ok: true, value: { status, body: body ?? {} } }
        return {
          ok: false,
          error: new TelcoAApiError(`${what}: answered ${status} without a JSON object`, false, undefined, { status }),
        }
      },
      refused: ({ status, text }) => {
        const body = parseJsonObject(text)
        const code = typeof body?.code === "number" ? body.code : undefined
        const detail = scrub(typeof body?.message === "string" ? body.message : text)
          .replace(/\s+/g, " ")
          .trim()
          .slice(0, ERROR_DETAIL_CHARS)
        const message =
          `${what}: answered ${status}${code === undefined ? "" : ` (code ${code})`}` +
          `${detail === "" ? "" : `: ${detail}`}`
        return new TelcoAApiError(message, retryableStatus(status), code, { status })
      },
    })

  return withRetries(
    attempt,
    (message, cause) =>
      new TelcoAApiError(message, true, cause.code, {
        cause,
        ...(cause.status !== undefined && { status: cause.status }),
      }),
  )
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)

/** telco_a writes capabilities as {voice, SMS, MMS} on offers and {voice, sms, mms} on owned numbers. */
function capabilitiesOf(v: unknown): { voice: boolean; sms: boolean } {
  const c = typeof v === "object" && v !== null ? (v as Record<string, unknown>) : {}
  return { voice: c.voice === true, sms: c.SMS === true || c.sms === true }
}

/** A failure as the numbers service reads it; `unknown` failures keep the status and retryability. */
function asInventoryError(e: unknown, reason?: "not_available" | "not_owned"): NumberInventoryError {
  if (e instanceof NumberInventoryError) return e
  if (!(e instanceof TelcoAApiError))
    return new NumberInventoryError(`telco_a: ${String(e)}`, false, "failed", { cause: e })
  const options = { cause: e, ...(e.status !== undefined && { status: e.status }) }
  if (e.status === 401 || e.status === 403)
    return new NumberInventoryError(
      `telco_a refused the account's credentials: ${e.message}`,
      false,
      "unauthorised",
      options,
    )
  if (!e.retryable && e.status !== undefined && e.status < 500 && reason !== undefined)
    return new NumberInventoryError(e.message, false, reason, options)
  return new NumberInventoryError(e.message, e.retryable, "failed", options)
}

const webhookForm = (w: NumberWebhooks): Record<string, string> => ({
  VoiceUrl: w.voiceUrl,
  VoiceMethod: "POST",
  StatusCallback: w.statusUrl,
  StatusCallbackMethod: "POST",
})

export function makeTelcoANumbers(account: TelcoAAccount, opts: TelcoAOptions = {}): NumberInventory {
  const call = (req: TelcoARequest) => telcoARequest(account, req, opts)

  /** The account's own number with this E.164, if it has it. */
  async function findOwned(phoneE164: string): Promise<string | undefined> {
    const { body } = await call({
      method: "GET",
      path: "/IncomingPhoneNumbers.json",
      query: { PhoneNumber: phoneE164 },
    })
    const list = Array.isArray(body.incoming_phone_numbers)
      ? (body.incoming_phone_numbers as Array<Record<string, unknown>>)
      : []
    return str(list.find((n) => n.phone_number === phoneE164)?.sid)
  }

  const wire = async (sid: string, w: NumberWebhooks): Promise<void> => {
    await call({ method: "POST", path: `/IncomingPhoneNumbers/${encodeURIComponent(sid)}.json`, form: webhookForm(w) })
  }

  return {
    provider: "telco_a",

    async search(q: NumberSearch): Promise<AvailableNumber[]> {
      const country = q.country.toUpperCase()
      const query: Record<string, string> = { PageSize: String(q.limit) }
      if (q.areaCode !== undefined) query.AreaCode = q.areaCode
      let body: Record<string, unknown>
      try {
        ;({ body } = await call({
          method: "GET",
          path: `/AvailablePhoneNumbers/${encodeURIComponent(country)}/Local.json`,
          query,
        }))
      } catch (e) {
        // A country telco_a does not sell numbers in is a 404: nothing available.
        if (e instanceof TelcoAApiError && e.status === 404) return []
        throw asInventoryError(e)
      }
      const offers = Array.isArray(body.available_phone_numbers)
        ? (body.available_phone_numbers as Array<Record<string, unknown>>)
        : []
      const out: AvailableNumber[] = []
      for (const o of offers.slice(0, q.limit)) {
        const phone = str(o.phone_number)
        if (phone === undefined) continue
        const region = str(o.region)
        const locality = str(o.locality)
        out.push({
          phone_e164: phone,
          country: str(o.iso_country) ?? country,
          ...(region && { region }),
          ...(locality && { locality }),
          capabilities: capabilitiesOf(o.capabilities),
        })
      }
      return out
    },

    async provision(req) {
      try {
        const { body } = await call({
          method: "POST",
          path: "/IncomingPhoneNumbers.json",
          form: { PhoneNumber: req.phoneE164, ...webhookForm(req) },
        })
        const sid = str(body.sid)
        if (sid === undefined)
          throw new NumberInventoryError("telco_a bought the number but answered without its sid", false, "failed")
        return { providerNumberId: sid }
      } catch (e) {
        const err = asInventoryError(e, "not_available")
        if (err.reason !== "not_available") throw err
        // A retried purchase whose first attempt went through is refused as "not available":
        // the number is ours already, so take it over (and set its webhooks) instead.
        const owned = await findOwned(req.phoneE164).catch((x: unknown) => {
          throw asInventoryError(x)
        })
        if (owned === undefined) throw err
        await wire(owned, req).catch((x: unknown) => {
          throw asInventoryError(x)
        })
        return { providerNumberId: owned }
      }
    },

    async registerOwned(req) {
      try {
        const sid = await findOwned(req.phoneE164)
        if (sid === undefined)
          throw new NumberInventoryError(`the telco_a account does not own ${req.phoneE164}`, false, "not_owned")
        await wire(sid, req)
        return { providerNumberId: sid }
      } catch (e) {
        throw e instanceof TelcoAApiError && e.status === 404 ? asInventoryError(e, "not_owned") : asInventoryError(e)
      }
    },

    async release(sid, o = {}) {
      try {
        if (o.keep === true) await wire(sid, { voiceUrl: "", statusUrl: "" })
        else await call({ method: "DELETE", path: `/IncomingPhoneNumbers/${encodeURIComponent(sid)}.json` })
      } catch (e) {
        // Already released (or moved off the account): nothing of ours is wired to it.
        if (e instanceof TelcoAApiError && e.status === 404) return
        throw asInventoryError(e)
      }
    },
  }
}
