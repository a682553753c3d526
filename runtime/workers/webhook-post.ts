// One webhook attempt: the stored body POSTed to its endpoint, signed with every live secret of
// the endpoint, through the guarded dispatcher; its result as the verdict (src/webhooks/delivery.ts)
// reads it, with a printable snippet of a failed answer. Never throws.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { Logger } from "pino"
import { request } from "undici"
import type { Config } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"
import { PROJECT_ROOT } from "../../src/platform/paths.js"
import { PrivateAddressRefused, webhookDispatcher } from "../../src/providers/outbound.js"
import { type AttemptResult, RESPONSE_DRAIN_MS, RESPONSE_READ_BYTES } from "../../src/webhooks/delivery.js"
import type { ClaimedDelivery } from "../../src/webhooks/outbox.repo.js"
import { type SecretBox, webhookSecretBox, webhookSecretKey } from "../../src/webhooks/secrets.js"
import { signWebhook } from "../../src/webhooks/signing.js"

/** How much of a failed answer's body is kept in last_error. */
const ERROR_SNIPPET_CHARS = 200

const USER_AGENT = `Parley-Webhooks/${
  (JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as { version: string }).version
}`

export type PostWebhook = (d: ClaimedDelivery) => Promise<{ result: AttemptResult; snippet: string }>

export const webhookPoster = (deps: { sql: Sql; log: Logger; config: Config }): PostWebhook => {
  const { sql, log, config } = deps
  const timeoutMs = config.webhookTimeoutMs
  // Endpoint URLs are the tenant's: always the guarded dispatcher (loopback too under
  // ALLOW_PRIVATE_PROVIDER_URLS, no other private range).
  const dispatcher = webhookDispatcher(config)
  // The key is read once (a database row when no master key is set); a failed read is tried again.
  let box: Promise<SecretBox> | undefined
  const secretBox = (): Promise<SecretBox> =>
    (box ??= webhookSecretKey(config, sql)
      .then(webhookSecretBox)
      .catch((e: unknown) => {
        box = undefined
        throw e
      }))

  /** One POST of the stored body, signed with every live secret; never throws. */
  return async (d: ClaimedDelivery): Promise<{ result: AttemptResult; snippet: string }> => {
    let secrets: string[]
    try {
      const b = await secretBox()
      secrets = [b.open(d.secret_ciphertext, d.tenant_id)]
      if (d.previous_secret_ciphertext !== null) secrets.push(b.open(d.previous_secret_ciphertext, d.tenant_id))
    } catch (err) {
      log.error({ err, endpoint_id: d.endpoint_id }, "webhook signing secret unreadable")
      return { result: { kind: "unsignable", message: "the endpoint's signing secret could not be read" }, snippet: "" }
    }
    const raw = Buffer.from(d.body, "utf8")
    try {
      // undici's request API, not fetch: the same dispatcher (so the same connect-time address guard)
      // at a quarter of fetch's CPU per request (bench/webhooks); it follows no redirect.
      const res = await request(d.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": USER_AGENT,
          "x-svc-event-id": d.event_id,
          "x-svc-signature": signWebhook(raw, secrets, Date.now() / 1000),
        },
        body: raw,
        signal: AbortSignal.timeout(timeoutMs),
        dispatcher,
      })
      // The verdict is the status line's. The body is read only for a failure's snippet and to
      // leave the connection reusable: at most RESPONSE_READ_BYTES, given up after RESPONSE_DRAIN_MS
      // (or the attempt's timeout), neither of which changes the verdict.
      const status = res.statusCode
      const body = await readAtMost(res.body, RESPONSE_READ_BYTES, RESPONSE_DRAIN_MS)
      if (status >= 300 && status < 400) return { result: { kind: "redirect", status }, snippet: "" }
      const ok = status >= 200 && status < 300
      return { result: { kind: "answered", status }, snippet: ok ? "" : printable(body) }
    } catch (e) {
      const refused = refusal(e)
      if (refused !== undefined) {
        // The address is the operator's to know (an internal DNS answer); the workspace reads the host only.
        log.warn(
          { endpoint_id: d.endpoint_id, host: refused.host, address: refused.address },
          "webhook delivery refused: not a public address",
        )
        return { result: { kind: "refused_private", message: refused.publicMessage }, snippet: "" }
      }
      return { result: failure(e), snippet: "" }
    }
  }
}

/** The address guard's refusal, when that is why the attempt failed. */
function refusal(e: unknown): PrivateAddressRefused | undefined {
  if (e instanceof PrivateAddressRefused) return e
  const cause = e instanceof Error ? e.cause : undefined
  return cause instanceof PrivateAddressRefused ? cause : undefined
}

/** How an attempt that got no usable answer failed (the address guard's refusals are told apart before). */
function failure(e: unknown): AttemptResult {
  if (e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")) return { kind: "timeout" }
  const cause = e instanceof Error ? e.cause : undefined
  const detail = cause instanceof Error ? `: ${cause.message}` : ""
  return { kind: "network", message: `${e instanceof Error ? e.message : String(e)}${detail}` }
}

/**
 * Up to `limit` bytes of the answer, read for at most `ms`; the rest is never read (the connection is
 * closed instead). A body that stalls, fails or is cut off leaves what arrived before.
 */
async function readAtMost(
  body: AsyncIterable<Buffer> & { destroy(): unknown },
  limit: number,
  ms: number,
): Promise<Buffer> {
  const chunks: Buffer[] = []
  let total = 0
  const timer = setTimeout(() => body.destroy(), ms)
  try {
    for await (const chunk of body) {
      chunks.push(chunk)
      total += chunk.byteLength
      if (total >= limit) {
        body.destroy()
        break
      }
    }
  } catch {
    // Given up (the drain's bound, the attempt's timeout) or the receiver hung up: what arrived stands.
  } finally {
    clearTimeout(timer)
  }
  return Buffer.concat(chunks).subarray(0, limit)
}

/** A receiver's answer as it may appear in the deliveries list: short, one line, printable. */
const printable = (body: Buffer): string =>
  body
    .subarray(0, ERROR_SNIPPET_CHARS * 4)
    .toString("utf8")
    .replace(/[^\x20-\x7e]+/g, " ")
    .trim()
    .slice(0, ERROR_SNIPPET_CHARS)
