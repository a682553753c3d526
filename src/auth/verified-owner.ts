// The one rule for spending: a workspace moves money (trial credit included) or uses Parley's own
// provider accounts only once its owner has verified their email, whoever asks (session or API key).
import { Effect } from "effect"
import { Db } from "../platform/Db.js"
import { Conflict } from "../platform/errors.js"
import { ownerEmailVerified } from "./auth.repo.js"

/**
 * The refusal, as a run's start answers it (runs.service's readiness gaps): 409 WORKFLOW_NOT_READY
 * with `email_verified` in `missing`, so a client handles every gated operation in one place.
 */
export const ownerNotVerified = (action: string): Conflict =>
  new Conflict({
    code: "WORKFLOW_NOT_READY",
    message:
      `verify the workspace owner's email before ${action}: open the link in the signup email, or sign in with a ` +
      "one-time code (POST /auth/otp/start)",
    details: { missing: ["email_verified"] },
  })

/** Fails with ownerNotVerified(action) unless the workspace's owner has verified their email. */
export const requireVerifiedOwner = (tenantId: number, action: string): Effect.Effect<void, Conflict, Db> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    if (!(yield* Effect.promise(() => ownerEmailVerified(sql, tenantId))))
      return yield* Effect.fail(ownerNotVerified(action))
  })
