// The mail provider as a service: a real mail API when MAIL_API_URL and MAIL_API_KEY are set,
// else the outbox simulator appending to OUTBOX_FILE.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Log } from "../platform/Log.js"
import { makeHttpMail } from "./mail/http.mail.js"
import type { MailProvider, OutgoingMail } from "./mail/mail.interface.js"
import { makeOutboxMail } from "./mail/outbox.mail.js"
import { outboundFor } from "./outbound.js"

export class Mail extends Context.Tag("parley/Mail")<Mail, MailProvider>() {}

export const MailLive: Layer.Layer<Mail, never, AppConfig> = Layer.effect(
  Mail,
  Effect.map(AppConfig, (config) =>
    // The adapter needs both: with only one set, every send would be refused by the API, so the
    // deployment keeps working on the outbox instead.
    config.mailApiUrl !== undefined && config.mailApiKey !== undefined
      ? makeHttpMail({
          baseUrl: config.mailApiUrl,
          apiKey: config.mailApiKey,
          from: config.mailFrom,
          outbound: outboundFor(config, "platform"),
        })
      : makeOutboxMail(config.outboxFile),
  ),
)

/** Longest a best-effort send may hold up the request that triggered it (the HTTP adapter retries within it). */
const BEST_EFFORT_TIMEOUT = "20 seconds"

/**
 * Sends mail whose failure must not fail the request (verification links, sign-in codes):
 * true when sent; false, logged, when the provider refused, failed or did not answer in time.
 */
export const sendBestEffort = (mail: OutgoingMail): Effect.Effect<boolean, never, Mail | Log> =>
  Effect.gen(function* () {
    const provider = yield* Mail
    const log = yield* Log
    return yield* Effect.tryPromise(() => provider.send(mail)).pipe(
      Effect.timeout(BEST_EFFORT_TIMEOUT),
      Effect.as(true),
      Effect.catchAll((e) =>
        Effect.sync(() => {
          log.warn({ err: "error" in e ? e.error : e, kind: mail.kind, provider: provider.name }, "mail not sent")
          return false
        }),
      ),
    )
  })
