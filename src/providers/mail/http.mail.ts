// The adapter for a real transactional-mail API (POST {base}/messages, bearer key, JSON in and
// out, the shape the common providers share): per-attempt timeout, bounded retries, typed errors.

import { randomUUID } from "node:crypto"
import { type Attempt, withRetries } from "../http.util.js"
import { type Outbound, PLATFORM_DEFAULT, retryableStatus, vendorAttempt } from "../outbound.js"
import { fromOnBehalf, MailDeliveryError, type MailProvider, type OutgoingMail } from "./mail.interface.js"

export interface HttpMailOptions {
  /** The API root without a trailing slash, e.g. https://api.mail.example/v1. */
  readonly baseUrl: string
  readonly apiKey: string
  /** The From header, e.g. "Parley <no-reply@parley.example>". */
  readonly from: string
  /** Limit for each attempt (connect, request and response body); default 5000 ms. */
  readonly timeoutMs?: number
  /** Replaces undici's fetch (tests). */
  readonly fetch?: typeof fetch
  /** The answer size cap (MAIL_API_URL is the platform's: no address guard); default 2 MiB. */
  readonly outbound?: Outbound
}

/** How much of a provider's error body goes into the error message. */
const ERROR_DETAIL_CHARS = 200

/** The outcome of one attempt: a result, or an error and whether another attempt may help. */
type MailAttempt = Attempt<string, MailDeliveryError>

export function makeHttpMail(opts: HttpMailOptions): MailProvider {
  const url = `${opts.baseUrl.replace(/\/+$/, "")}/messages`
  const timeoutMs = opts.timeoutMs ?? 5_000
  const outbound = opts.outbound ?? PLATFORM_DEFAULT
  // The key must never reach a log line or an error message, even if a provider echoes it back.
  const scrub = (s: string): string => (opts.apiKey === "" ? s : s.split(opts.apiKey).join("***"))

  const attempt = (body: string, idempotencyKey: string): Promise<MailAttempt> =>
    vendorAttempt({
      url,
      init: {
        method: "POST",
        headers: {
          authorization: `Bearer ${opts.apiKey}`,
          "content-type": "application/json",
          accept: "application/json",
          // Lets the provider drop the duplicate when an attempt timed out after it had in fact
          // accepted the message and we send it again.
          "idempotency-key": idempotencyKey,
        },
        body,
      },
      timeoutMs,
      outbound,
      fetch: opts.fetch,
      unreachable: (f, e) =>
        new MailDeliveryError(`mail API ${scrub(f.message)}`, f.retryable, {
          cause: e,
          ...(f.status !== undefined && { status: f.status }),
        }),
      answered: ({ status, text }) => {
        const id = parseId(text)
        if (id !== undefined) return { ok: true, value: id }
        // Accepted but not understood (a wrong base URL answering 200, say): sending again would
        // not help, and might deliver twice.
        return {
          ok: false,
          error: new MailDeliveryError(`mail API answered ${status} without a message id`, false, { status }),
        }
      },
      refused: ({ status, text }) => {
        const detail = scrub(text.slice(0, ERROR_DETAIL_CHARS)).replace(/\s+/g, " ").trim()
        // 429 and 5xx may pass later; any other 4xx is about this request (bad address, bad key,
        // bad payload): it will fail the same way every time.
        return new MailDeliveryError(
          `mail API answered ${status}${detail === "" ? "" : `: ${detail}`}`,
          retryableStatus(status),
          { status },
        )
      },
    })

  return {
    name: "http",
    async send(mail: OutgoingMail): Promise<{ id: string }> {
      const body = JSON.stringify({
        from: fromOnBehalf(opts.from, mail.senderName),
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
        tags: [mail.kind],
        ...(mail.headers !== undefined && { headers: mail.headers }),
      })
      const idempotencyKey = randomUUID()
      const id = await withRetries(
        () => attempt(body, idempotencyKey),
        (message, cause) =>
          new MailDeliveryError(message, true, { cause, ...(cause.status !== undefined && { status: cause.status }) }),
      )
      return { id }
    },
  }
}

function parseId(text: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === "object" && parsed !== null) {
      const id = (parsed as Record<string, unknown>).id
      if (typeof id === "string" && id !== "") return id
      if (typeof id === "number") return String(id)
    }
  } catch {
    // Not JSON: the caller reports it as a missing id.
  }
  return undefined
}
