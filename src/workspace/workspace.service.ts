// The workspace itself: its name (what callees hear), read by every member and renamed by owners
// and admins, with the change in the audit log.
import { Effect } from "effect"
import { recordAudit } from "../audit/audit.repo.js"
import { auditActorOf } from "../audit/audit.service.js"
import { findTenant, renameTenant, type TenantRow, tenantView } from "../auth/auth.repo.js"
import type { Principal } from "../auth/principal.js"
import { Db } from "../platform/Db.js"

export const getWorkspace = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* Effect.promise(() => findTenant(sql, tenantId))
    if (!tenant) return yield* Effect.dieMessage(`tenant ${tenantId} of a valid credential is missing`)
    return tenantView(tenant)
  })

export const renameWorkspace = (caller: Principal, ip: string, name: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const renamed = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const r = await renameTenant(tx, caller.tenantId, name)
          if (r.before !== name)
            await recordAudit(tx, auditActorOf(caller, ip), {
              action: "workspace.renamed",
              target: `workspace:${caller.tenantId}`,
              before: { name: r.before },
              after: { name },
            })
          return r.after
        }) as Promise<TenantRow>,
    )
    return tenantView(renamed)
  })
