// SQL of the audit log (audit_events, append-only by trigger): member, key, money-setting and
// role-gated changes, each written in the transaction that makes it true.
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { ListPage } from "../platform/page.cursor.js"

/** Who did it, as the log names them. */
export interface AuditActor {
  readonly tenantId: number
  /** "user:<id>", "key:<id>" or "system". */
  readonly actor: string
  readonly email: string | null
  readonly role: string | null
  readonly ip: string | null
}

export interface AuditEntry {
  /** `<thing>.<verb>`: member.invited, api_key.revoked, autocharge.updated, workflow.retired … */
  readonly action: string
  /** What it was done to: "user:5", "api_key:3", "invitation:2", "DELETE /api/workflows/7" … */
  readonly target: string | null
  readonly before?: unknown
  readonly after?: unknown
}

export interface AuditRow {
  readonly id: number
  readonly at: Date
  readonly actor: string
  readonly actor_email: string | null
  readonly actor_role: string | null
  readonly ip: string | null
  readonly action: string
  readonly target: string | null
  readonly before: unknown
  readonly after: unknown
}

export const recordAudit = async (tx: Tx | Sql, who: AuditActor, e: AuditEntry): Promise<void> => {
  await tx`
    insert into audit_events (tenant_id, actor, actor_email, actor_role, ip, action, target, before, after)
    values (${who.tenantId}, ${who.actor}, ${who.email}, ${who.role}, ${who.ip}, ${e.action}, ${e.target},
      ${e.before === undefined ? null : tx.json(e.before as never)},
      ${e.after === undefined ? null : tx.json(e.after as never)})`
}

/** One action ("member.invited"), every action of a prefix ("member."), or all. */
const actionFilter = (sql: Sql, action: string | undefined) =>
  action === undefined
    ? sql``
    : action.endsWith(".")
      ? sql`and starts_with(action, ${action})`
      : sql`and action = ${action}`

/** Newest first, `limit + 1` rows from before the cursor, optionally of one action or its prefix. */
export const listAudit = (
  sql: Sql,
  tenantId: number,
  page: ListPage,
  action: string | undefined,
): Promise<AuditRow[]> =>
  sql<AuditRow[]>`
    select id, at, actor, actor_email, actor_role, ip, action, target, before, after from audit_events
    where tenant_id = ${tenantId}
      ${page.before === undefined ? sql`` : sql`and id < ${page.before}`}
      ${actionFilter(sql, action)}
    order by id desc limit ${page.limit + 1}`

/**
 * A data-subject erase (src/dsr/), the one change the append-only log takes (its trigger lets this
 * transaction through): the contact's phone or email becomes the marker wherever it appears.
 */
export async function pseudonymiseAudit(tx: Tx, m: ContactMatch): Promise<number> {
  await tx`select set_config('parley.audit_pseudonymise', 'on', true)`
  const rewritten = await tx`
    update audit_events set actor_email = ${m.scrub("actor_email")}, target = ${m.scrub("target")},
      before = ${m.scrub("before")}::jsonb, after = ${m.scrub("after")}::jsonb
    where tenant_id = ${m.tenantId} and (${m.mentions("actor_email")} or ${m.mentions("target")}
      or ${m.mentions("before")} or ${m.mentions("after")})`
  await tx`select set_config('parley.audit_pseudonymise', 'off', true)`
  return rewritten.count
}
