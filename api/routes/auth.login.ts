// POST /auth/login: a session JWT in the body and in the svc_session cookie.
import { Effect } from "effect"
import { z } from "zod"
import { login } from "../../src/auth/auth.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Email } from "../schemas.js"
import { sessionCookie } from "../session.js"

export default route({
  method: "POST",
  path: "/auth/login",
  auth: "public",
  summary: "Sign in with email and password",
  tags: ["auth"],
  body: { json: z.object({ email: Email, password: z.string().min(1, "is required").max(1024) }) },
  responses: { 200: { description: "{token, expires_in, user, tenant}; sets the svc_session cookie" } },
  handler: ({ body, clientIp }) =>
    Effect.map(login({ email: body!.email, password: body!.password, ip: clientIp }), (session) =>
      json(session, 200, { "Set-Cookie": sessionCookie(session.token), "Cache-Control": "no-store" }),
    ),
})
