// The byok plan's monthly platform fee: a subscription the customer authorises through a mandate
// link, charged on authorisation and then every month until cancelled. Each charge is recorded
// once per period (so several runtime processes renewing at once cannot charge twice) and lands
// in the ledger as the mandate payment received and the fee taken, which leaves the balance as it was.
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { Clock } from "../platform/Clock.js"
import { Db, isUniqueViolation, type Tx } from "../platform/Db.js"
import { Conflict, NotFound } from "../platform/errors.js"
import { periodic } from "../platform/periodic.js"
import { iso } from "../platform/time.js"
import { findTenantPlan, setPlanTier } from "../workspaces/workspaces.repo.js"
import { postEntry } from "./ledger.repo.js"
import { BYOK_FEE_MINOR } from "./pricing.js"
import type { SubscriptionRow } from "./subscription.repo.js"
import * as repo from "./subscription.repo.js"

export const subscriptionView = (s: SubscriptionRow) => ({
  id: s.id,
  plan: s.plan,
  status: s.status,
  amount_minor: s.amount_minor,
  currency: s.currency,
  short_url: s.short_url,
  current_period_start: iso(s.current_period_start),
  current_period_end: iso(s.current_period_end),
  created_at: s.created_at.toISOString(),
  cancelled_at: iso(s.cancelled_at),
})

/** One calendar month after `d` (the 31st becomes the month's last day). */
export function addMonth(d: Date): Date {
  const next = new Date(
    Date.UTC(
      d.getUTCFullYear(),
      d.getUTCMonth() + 1,
      1,
      d.getUTCHours(),
      d.getUTCMinutes(),
      d.getUTCSeconds(),
      d.getUTCMilliseconds(),
    ),
  )
  const lastDay = new Date(Date.UTC(next.getUTCFullYear(), next.getUTCMonth() + 1, 0)).getUTCDate()
  next.setUTCDate(Math.min(d.getUTCDate(), lastDay))
  return next
}

export const getSubscription = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const open = yield* Effect.promise(() => repo.findOpen(sql, tenantId))
    const t = yield* Effect.promise(() => findTenantPlan(sql, tenantId))
    return {
      subscription: open ? subscriptionView(open) : null,
      plan_tier: t.plan_tier,
      fee_minor: BYOK_FEE_MINOR[t.currency],
      currency: t.currency,
    }
  })

/** Starts a subscription waiting for the customer to authorise the mandate at `short_url`. */
export const createSubscription = (tenantId: number, baseUrl: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const existing = yield* Effect.promise(() => repo.findOpen(sql, tenantId))
    if (existing?.status === "active")
      return yield* Effect.fail(
        new Conflict({ code: "SUBSCRIPTION_EXISTS", message: "the workspace already has an active subscription" }),
      )
    if (existing) return { created: false, subscription: subscriptionView(existing) }
    const t = yield* Effect.promise(() => findTenantPlan(sql, tenantId))
    // The mandate is authorised through the stub gateway's link until a gateway adapter supports
    // recurring mandates; the stub webhook with this external id authorises it.
    const externalId = `sub_${randomBytes(12).toString("hex")}`
    const shortUrl = `${baseUrl}/billing/return?status=mandate_pending&order_id=${externalId}`
    return yield* Effect.tryPromise({
      try: () =>
        repo.insertPending(sql, {
          tenantId,
          amountMinor: BYOK_FEE_MINOR[t.currency],
          currency: t.currency,
          externalId,
          shortUrl,
        }),
      catch: (e) => e,
    }).pipe(
      Effect.map((row) => ({ created: true, subscription: subscriptionView(row) })),
      // A concurrent create won the one-open-subscription index: answer with theirs. Anything
      // else is a database failure, not a race.
      Effect.catchAll((e) =>
        isUniqueViolation(e, "subscriptions_one_open")
          ? Effect.promise(async () => ({
              created: false,
              subscription: subscriptionView((await repo.findOpen(sql, tenantId))!),
            }))
          : Effect.die(e),
      ),
    )
  })

export const cancelSubscription = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const row = yield* Effect.promise(() => repo.cancelOpen(sql, tenantId))
    if (!row) return yield* Effect.fail(new NotFound({ message: "the workspace has no subscription to cancel" }))
    yield* Effect.promise(() => setPlanTier(sql, tenantId, "free", "byok"))
    return subscriptionView(row)
  })

/** Records one period's charge once; false when that period was already charged. */
async function chargePeriod(tx: Tx, s: SubscriptionRow, start: Date, end: Date): Promise<boolean> {
  if (!(await repo.insertCharge(tx, s, start, end))) return false
  const key = `subscription:${s.id}:${start.toISOString()}`
  await postEntry(tx, {
    tenantId: s.tenant_id,
    amountMinor: s.amount_minor,
    kind: "mandate_payment",
    reference: s.external_id,
    idempotencyKey: `${key}:in`,
  })
  await postEntry(tx, {
    tenantId: s.tenant_id,
    amountMinor: -s.amount_minor,
    kind: "platform_fee",
    reference: s.external_id,
    idempotencyKey: `${key}:fee`,
  })
  await repo.setPeriod(tx, s.id, start, end)
  return true
}

/** The mandate was authorised: activate and charge the first period. Idempotent. */
export async function authoriseSubscription(
  tx: Tx,
  externalId: string,
  now: Date,
): Promise<"activated" | "already_active" | "unknown" | "cancelled"> {
  const s = await repo.lockByExternalId(tx, externalId)
  if (!s) return "unknown"
  if (s.status === "cancelled") return "cancelled"
  if (s.status === "active") return "already_active"
  await repo.activate(tx, s.id)
  await setPlanTier(tx, s.tenant_id, "byok")
  await chargePeriod(tx, s, now, addMonth(now))
  return "activated"
}

/** Charges every active subscription whose period has ended; returns how many were charged. */
export const renewDueSubscriptions = Effect.gen(function* () {
  const { sql } = yield* Db
  const clock = yield* Clock
  const now = clock.now()
  return yield* Effect.promise(
    () =>
      sql.begin(async (tx) => {
        // skip locked: another runtime process renewing at the same time takes the rest.
        const due = await repo.lockDue(tx, now, 100)
        let charged = 0
        for (const s of due)
          if (await chargePeriod(tx, s, s.current_period_end!, addMonth(s.current_period_end!))) charged++
        return charged
      }) as Promise<number>,
  )
})

/** The renewal loop the runtime role runs; a failed tick is logged and the next one retries. */
export const renewalLoop = periodic({
  what: "subscription renewals",
  every: "1 minute",
  tick: renewDueSubscriptions,
  report: (charged) => (charged > 0 ? { charged } : undefined),
  reported: "subscription renewals charged",
})
