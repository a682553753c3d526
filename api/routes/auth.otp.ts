// POST /auth/otp/start, /auth/otp/resend and /auth/otp/verify: sign-in by emailed code. Start and
// resend ask the ALTCHA challenge when it is required; verify answers like login and sets the cookie.
import { Effect } from "effect"
import { z } from "zod"
import { Challenge } from "../../src/auth/Challenge.js"
import { sendCode, verifyCode } from "../../src/auth/otp.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Email } from "../schemas.js"
import { sessionCookie } from "../session.js"

const OtpStartRequest = z.object({ email: Email, altcha: z.string().max(4096).optional() })

const send = (path: string, summary: string, mode: "start" | "resend") =>
  route({
    method: "POST",
    path,
    auth: "public",
    summary,
    tags: ["auth"],
    body: { json: OtpStartRequest },
    handler: ({ body, clientIp }) =>
      Effect.gen(function* () {
        // Resend mails a new code as start does, so it must not be the way around the challenge.
        yield* Challenge.require(body!.altcha)
        return json(yield* sendCode(body!.email, mode, clientIp))
      }),
  })

export const otpStart = send(
  "/auth/otp/start",
  "Email a 6-digit sign-in code (valid 10 minutes; at most 5 codes per address per hour)",
  "start",
)
export const otpResend = send(
  "/auth/otp/resend",
  "Email a new sign-in code after a start; at most once per 30 s and 5 codes per address per hour",
  "resend",
)

export const otpVerify = route({
  method: "POST",
  path: "/auth/otp/verify",
  auth: "public",
  summary:
    "Sign in with an emailed code; answers like /auth/login. Wrong guesses are budgeted per address and per IP per " +
    "hour (429 past it)",
  tags: ["auth"],
  body: {
    json: z.object({
      email: Email,
      code: z
        .string()
        .trim()
        .regex(/^\d{6}$/, "must be the 6-digit code"),
    }),
  },
  handler: ({ body, clientIp }) =>
    Effect.map(verifyCode(body!.email, body!.code, clientIp), (session) =>
      json(session, 200, { "Set-Cookie": sessionCookie(session.token), "Cache-Control": "no-store" }),
    ),
})
