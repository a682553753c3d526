// POST /auth/signup: a workspace, its owner, the trial credit, and a verification email (sent only
// with a trusted base URL for its link). Throttled per client IP.
import { Effect } from "effect"
import { z } from "zod"
import { parseCookies } from "../../src/auth/authenticator.js"
import { Challenge } from "../../src/auth/Challenge.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { signup } from "../../src/signup/signup.service.js"
import { AttributionFields, FIRST_TOUCH_COOKIE, parseFirstTouch } from "../../src/usage-events/attribution.js"
import { COUNTRIES } from "../../src/workspaces/workspaces.service.js"
import { trustedBaseUrl } from "../base-url.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Email, WorkspaceName } from "../schemas.js"

export default route({
  method: "POST",
  path: "/auth/signup",
  auth: "public",
  summary: "Create a workspace and its owner; credits the trial and sends a verification email",
  tags: ["auth"],
  body: {
    json: z.object({
      email: Email,
      password: z.string().min(10, "must be at least 10 characters").max(256, "must be at most 256 characters"),
      full_name: z.string().trim().min(1).max(200).optional(),
      // What callees will hear ("… calling from <workspace_name>"); derived when absent.
      workspace_name: WorkspaceName.optional(),
      country: z.enum(COUNTRIES, { error: `must be one of ${COUNTRIES.join(", ")}` }).default("US"),
      altcha: z.string().max(4096).optional(),
      // Attribution (optional): utm_source/medium/campaign, referrer, landing_path; see attribution.ts.
      ...AttributionFields.shape,
    }),
  },
  responses: {
    201: {
      description:
        "Created: {tenant, user, verify_email_sent}; verify_email_sent is false when the mail failed or no trusted " +
        "base URL was known for its link",
    },
    429: {
      description:
        "RATE_LIMITED: too many signups from this client IP this hour (SIGNUPS_PER_IP_HOUR); Retry-After says when " +
        "to try again",
    },
  },
  handler: ({ body, headers, clientIp }) =>
    Effect.gen(function* () {
      const config = yield* AppConfig
      const b = body!
      yield* Challenge.require(b.altcha)
      const created = yield* signup({
        email: b.email,
        password: b.password,
        fullName: b.full_name,
        workspaceName: b.workspace_name,
        country: b.country,
        baseUrl: trustedBaseUrl(config, headers),
        ip: clientIp,
        attribution: {
          body: {
            utm_source: b.utm_source,
            utm_medium: b.utm_medium,
            utm_campaign: b.utm_campaign,
            referrer: b.referrer,
            landing_path: b.landing_path,
          },
          firstTouch: parseFirstTouch(parseCookies(headers["cookie"])[FIRST_TOUCH_COOKIE]),
        },
      })
      return json(created, 201)
    }),
})
