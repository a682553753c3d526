// POST /auth/logout: revokes the presented session everywhere and clears the cookie; idempotent.
import { Effect } from "effect"
import { logout } from "../../src/auth/auth.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { clearedSessionCookie, presentedSession } from "../session.js"

export default route({
  method: "POST",
  path: "/auth/logout",
  auth: "public",
  summary: "Sign out: the session's token stops working in every process",
  tags: ["auth"],
  handler: ({ headers }) =>
    Effect.as(logout(presentedSession(headers)), json({ ok: true }, 200, { "Set-Cookie": clearedSessionCookie() })),
})
