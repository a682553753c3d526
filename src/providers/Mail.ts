// The mail provider as a service: a real mail API when MAIL_API_URL and MAIL_API_KEY are set,
// else the outbox simulator appending to OUTBOX_FILE.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../services/AppConfig.js"
import { makeHttpMail } from "./mail/http.mail.js"
import type { MailProvider } from "./mail/mail.interface.js"
import { makeOutboxMail } from "./mail/outbox.mail.js"

export class Mail extends Context.Tag("parley/Mail")<Mail, MailProvider>() {}

export const MailLive: Layer.Layer<Mail, never, AppConfig> = Layer.effect(
  Mail,
  Effect.map(AppConfig, (config) =>
    // The adapter needs both: with only one set, every send would be refused by the API, so the
    // deployment keeps working on the outbox instead.
    config.mailApiUrl !== undefined && config.mailApiKey !== undefined
      ? makeHttpMail({ baseUrl: config.mailApiUrl, apiKey: config.mailApiKey, from: config.mailFrom })
      : makeOutboxMail(config.outboxFile),
  ),
)
