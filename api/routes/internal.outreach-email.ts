// POST /api/internal/outreach/email: one email to one contact through the mail provider, with an
// unsubscribe link and the RFC 8058 one-click headers; 409 RECIPIENT_SUPPRESSED for an address
// that bounced, complained or unsubscribed (channel "transactional" is never blocked).
import { Effect } from "effect"
import { z } from "zod"
import { sendOutreach } from "../../src/email/email.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { trustedBaseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Email } from "../schemas.js"
import { systemTenantOf } from "../session.js"

export const OutreachEmailIn = z
  .looseObject({
    to: Email,
    subject: z.string().trim().min(1).max(300),
    text: z.string().max(100_000).optional(),
    html: z.string().max(200_000).optional(),
    channel: z
      .string()
      .regex(/^[a-z0-9][a-z0-9_-]{0,39}$/, "must be a short lower-case name")
      .default("outreach"),
    template: z.string().max(100).optional(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((b) => b.text !== undefined || b.html !== undefined, { message: "text or html is required", path: ["text"] })

export default route({
  method: "POST",
  path: "/api/internal/outreach/email",
  auth: "system",
  summary:
    "Send an outreach email (X-System-Key and X-Tenant-Id): 201 with the message; 409 RECIPIENT_SUPPRESSED " +
    "when the address is suppressed or unsubscribed from the channel",
  tags: ["internal", "email"],
  body: { json: OutreachEmailIn },
  handler: ({ systemTenantId, body, headers }) =>
    Effect.gen(function* () {
      const tenantId = yield* systemTenantOf(systemTenantId)
      const config = yield* AppConfig
      const base = trustedBaseUrl(config, headers) ?? `http://localhost:${config.port}`
      const b = body!
      const sent = yield* sendOutreach(
        tenantId,
        {
          to: b.to,
          subject: b.subject,
          text: b.text,
          html: b.html,
          channel: b.channel,
          template: b.template,
          data: b.data,
        },
        base,
      )
      return json(sent, 201)
    }),
})
