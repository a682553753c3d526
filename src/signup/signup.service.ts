// Signup: a new workspace and its owner, as one transaction across the domains that each own a
// part of it. Workspaces makes the workspace (its name, country, currency and trial), auth the
// owner's account and the verification link, billing the wallet and its trial credit, and
// attribution records where the signup came from. None of them knows about the others; this is
// the one place that puts them together.
import { Effect } from "effect"
import { insertUser, type UserRow, userView } from "../auth/auth.repo.js"
import { newEmailVerification, sendVerification } from "../auth/auth.service.js"
import { hashPassword } from "../auth/passwords.js"
import { openTrialWallet } from "../billing/wallet.service.js"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db, isUniqueViolation } from "../platform/Db.js"
import { Conflict, RateLimited } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import * as counters from "../platform/rate-counters.repo.js"
import type { SignupAttribution } from "../usage-events/attribution.js"
import { recordSignupSource } from "../usage-events/attribution.service.js"
import { type TenantRow, tenantView } from "../workspaces/workspaces.repo.js"
import { type Country, createWorkspace } from "../workspaces/workspaces.service.js"

/**
 * A workspace, its owner and the trial credit. Every attempt from one client IP counts against
 * SIGNUPS_PER_IP_HOUR before anything else (failures such as a taken email too, so the endpoint
 * cannot be used to test addresses at speed, nor to farm trial credit). The verification link is
 * mailed only with a trusted `baseUrl` (PUBLIC_BASE_URL or an allowed Host): a link built from a
 * Host the client chose would hand the token to whoever owns that host.
 */
export const signup = (input: {
  email: string
  password: string
  fullName: string | undefined
  /** The workspace's name; derived from the email's business or the person when absent. */
  workspaceName?: string | undefined
  country: Country
  baseUrl: string | undefined
  ip: string
  /** Where the signup came from (stored with it for GET /api/internal/attribution/signups). */
  attribution?: SignupAttribution
}) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const log = yield* Log
    const clock = yield* Clock
    const now = clock.now()
    const budget = yield* Effect.promise(() =>
      counters.hit(sql, `signup:ip:${input.ip}`, { limit: config.signupsPerIpHour, windowMs: counters.HOUR_MS }, now),
    )
    if (!budget.allowed)
      return yield* Effect.fail(
        new RateLimited({
          retryAfterSeconds: budget.retryAfterSeconds,
          message: "too many signups from this address; try again later",
        }),
      )
    const passwordHash = yield* Effect.promise(() => hashPassword(input.password))
    const created = yield* Effect.tryPromise({
      try: () =>
        sql.begin(async (tx) => {
          const tenant = await createWorkspace(tx, {
            email: input.email,
            ...(input.fullName !== undefined && { fullName: input.fullName }),
            ...(input.workspaceName !== undefined && { workspaceName: input.workspaceName }),
            country: input.country,
            now,
          })
          const user = await insertUser(tx, {
            tenantId: tenant.id,
            email: input.email,
            fullName: input.fullName ?? null,
            passwordHash,
          })
          await openTrialWallet(tx, tenant.id, tenant.currency)
          await recordSignupSource(tx, {
            tenantId: tenant.id,
            userId: user.id,
            attribution: input.attribution,
            at: now,
          })
          const token = await newEmailVerification(tx, user.id, now)
          return { tenant, user, token }
        }) as Promise<{ tenant: TenantRow; user: UserRow; token: string }>,
      catch: (e) => e,
    }).pipe(
      Effect.catchAll((e) =>
        isUniqueViolation(e, "users_email_key")
          ? Effect.fail(new Conflict({ code: "EMAIL_TAKEN", message: "an account with this email already exists" }))
          : Effect.die(e),
      ),
    )
    let sent = false
    if (input.baseUrl === undefined)
      log.warn(
        { userId: created.user.id },
        "verification email not sent: no trusted base URL (set PUBLIC_BASE_URL or ALLOWED_HOSTS)",
      )
    else sent = yield* sendVerification(input.email, created.token, input.baseUrl)
    return { tenant: tenantView(created.tenant), user: userView(created.user), verify_email_sent: sent }
  })
