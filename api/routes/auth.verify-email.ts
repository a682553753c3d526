// GET /auth/verify-email?token=: confirms the address the link was sent to (valid 24 hours).
import { Effect } from "effect"
import { z } from "zod"
import { verifyEmail } from "../../src/auth/auth.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"

export default route({
  method: "GET",
  path: "/auth/verify-email",
  auth: "public",
  summary: "Verify an email address from the emailed link; repeating it is harmless",
  tags: ["auth"],
  query: z.object({ token: z.string().min(1, "is required").max(200) }),
  handler: ({ query }) => Effect.map(verifyEmail(query.token), (r) => json(r)),
})
