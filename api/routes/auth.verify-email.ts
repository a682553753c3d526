// GET /auth/verify-email?token=: confirms the address the link was sent to (valid 24 hours). A
// browser (Accept: text/html first) gets a page that says so and leads to the console; an API
// client gets JSON. POST /auth/verify-email/resend mails the signed-in user a new link.
import { Effect, Either } from "effect"
import { z } from "zod"
import { resendVerification, verifyEmail } from "../../src/auth/auth.service.js"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { trustedBaseUrl } from "../base-url.js"
import { toHttpError } from "../error-map.js"
import { esc, page } from "../html.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { userOf } from "../session.js"

/** Whether the client asks for a page first: a browser following the emailed link. */
export const wantsHtml = (accept: string | undefined): boolean => {
  if (accept === undefined) return false
  const html = accept.indexOf("text/html")
  const jsonAt = accept.indexOf("application/json")
  return html !== -1 && (jsonAt === -1 || html < jsonAt)
}

export const verifyEmailGet = route({
  method: "GET",
  path: "/auth/verify-email",
  auth: "public",
  summary:
    "Verify an email address from the emailed link; repeating it is harmless. A browser (Accept: text/html) gets " +
    "a page, an API client JSON",
  tags: ["auth"],
  query: z.object({ token: z.string().min(1, "is required").max(200) }),
  responses: {
    200: {
      description: "{ok, email, verified_at}",
      alternatives: [{ contentType: "text/html" }],
    },
  },
  handler: ({ query, headers }) =>
    Effect.gen(function* () {
      const outcome = yield* Effect.either(verifyEmail(query.token))
      if (!wantsHtml(headers["accept"]))
        return Either.isRight(outcome) ? json(outcome.right) : yield* Effect.fail(outcome.left)
      if (Either.isRight(outcome))
        return page(
          "Email verified",
          `<h1>Your email is verified</h1><p>${esc(outcome.right.email)} is confirmed: your workspace can run ` +
            'campaigns and spend its credit.</p><p><a href="/console/#/campaigns">Open the console</a></p>',
        )
      const { status, body } = toHttpError(outcome.left)
      return page(
        "Verification link not valid",
        `<h1>This link did not work</h1><p>${esc(body.error)}</p>` +
          '<p><a href="/console/#/settings">Sign in</a> and choose “Send the link again”.</p>',
        status,
      )
    }),
})

export const verifyEmailResend = route({
  method: "POST",
  path: "/auth/verify-email/resend",
  auth: "jwt-only",
  permission: "read",
  summary: "Mail the signed-in user a new verification link (at most 5 an hour); nothing when already verified",
  tags: ["auth"],
  responses: { 200: { description: "{sent, already_verified}" } },
  handler: ({ principal, headers }) =>
    Effect.gen(function* () {
      const user = yield* userOf(principal)
      const config = yield* AppConfig
      return json(yield* resendVerification(user, trustedBaseUrl(config, headers)))
    }),
})
