// POST /dsr/export: what the workspace holds about one contact (a phone in any format, or an email),
// from every contact-bearing table (src/dsr/contact-tables.ts). Signed-in users of any role; API keys
// are refused (API_KEY_NOT_ALLOWED). Each export is on record by the contact's keyed hash.
import { Effect } from "effect"
import { z } from "zod"
import { exportContact } from "../../src/dsr/export.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { baseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "POST",
  path: "/dsr/export",
  auth: "jwt-only",
  // Any member, analysts included, may answer a contact's access request: it only reads.
  permission: "read",
  summary: "Export everything held about a contact (data-subject access request)",
  tags: ["dsr"],
  body: {
    json: z.object({
      contact_identifier: z
        .string({ error: "is required" })
        .trim()
        .min(1, "is required")
        .max(254, "must be at most 254 characters"),
    }),
  },
  handler: ({ principal, body, headers }) =>
    Effect.gen(function* () {
      const config = yield* AppConfig
      const { recordingsToken, ...exported } = yield* exportContact(principal!, body!.contact_identifier)
      return json({
        ...exported,
        // A link the data subject can be given: absolute where the deployment knows its address.
        ...(recordingsToken !== undefined && {
          recordings_zip_url: `${baseUrl(config, headers)}/dsr/recordings/${recordingsToken}`,
        }),
      })
    }),
})
