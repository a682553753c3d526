// The workspace itself: made at signup (its name, country, currency and trial), read by every
// member, and renamed by owners and admins (what callees hear), with the change in the audit log.
import { Effect } from "effect"
import { type AuditActor, recordAudit } from "../audit/audit.repo.js"
import { Db, type Tx } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"
import { defaultWorkspaceName } from "./workspace-name.js"
import { findTenant, insertTenant, renameTenant, type TenantRow, workspaceView } from "./workspaces.repo.js"

export const COUNTRIES = ["IN", "US", "GB", "AU", "CA", "SG", "AE"] as const
export type Country = (typeof COUNTRIES)[number]

/** How long a new workspace's trial lasts. */
const TRIAL_DAYS = 14

export const currencyFor = (country: Country): Currency => (country === "IN" ? "INR" : "USD")

/**
 * A new workspace in `tx` (signup's transaction): named as asked, else after the email's business
 * or the person (workspace-name.ts), in the country's currency, its trial running from `now`.
 */
export const createWorkspace = (
  tx: Tx,
  w: { email: string; fullName?: string; workspaceName?: string; country: Country; now: Date },
): Promise<TenantRow> =>
  insertTenant(tx, {
    name: defaultWorkspaceName({
      email: w.email,
      ...(w.fullName !== undefined && { fullName: w.fullName }),
      ...(w.workspaceName !== undefined && { workspaceName: w.workspaceName }),
    }),
    country: w.country,
    currency: currencyFor(w.country),
    trialExpiresAt: new Date(w.now.getTime() + TRIAL_DAYS * 86_400_000),
  })

export const getWorkspace = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* Effect.promise(() => findTenant(sql, tenantId))
    if (!tenant) return yield* Effect.dieMessage(`tenant ${tenantId} of a valid credential is missing`)
    return workspaceView(tenant)
  })

/** Renames the caller's workspace (`actor.tenantId`); the audit entry says the name before and after. */
export const renameWorkspace = (actor: AuditActor, name: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const renamed = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const r = await renameTenant(tx, actor.tenantId, name)
          if (r.before !== name)
            await recordAudit(tx, actor, {
              action: "workspace.renamed",
              target: `workspace:${actor.tenantId}`,
              before: { name: r.before },
              after: { name },
            })
          return r.after
        }) as Promise<TenantRow>,
    )
    return workspaceView(renamed)
  })
