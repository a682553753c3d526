// The audit log: who changed the team, the keys, the money settings, or did what only owners and
// admins may, from where, with the state before and after. Written by the change's own
// transaction (recordAudit) or, for a role-gated route without its own entry, by the pipeline
// after the handler succeeded (auditRoute). Read by owners and admins, newest first.
import { Effect } from "effect"
import { Db } from "../platform/Db.js"
import { type ListPage, pageOf } from "../platform/page.cursor.js"
import { type AuditActor, listAudit, recordAudit } from "./audit.repo.js"

/** Keys of a logged request body whose values are secrets: the log keeps that they were set. */
const SECRET_KEY = /secret|password|token|api_key|card|cvv|otp|code$/i

/** A body as the log keeps it: secrets masked, long strings cut, at most a few levels deep. */
export function redactForAudit(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return value.length > 500 ? `${value.slice(0, 500)}…` : value
  if (value === null || typeof value !== "object") return value
  if (depth >= 4) return "…"
  if (Array.isArray(value)) return value.slice(0, 50).map((v) => redactForAudit(v, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value).slice(0, 50))
    out[k] = SECRET_KEY.test(k) && v !== null && v !== undefined && v !== "" ? "[set]" : redactForAudit(v, depth + 1)
  return out
}

/**
 * A role-gated route's success, for routes whose service writes no entry of its own: the action
 * is `route.<method>`, the target the route's path with its parameters, and `after` the request's
 * body (secrets masked). Runs after the handler; the entry names the request id.
 */
export const auditRoute = (
  actor: AuditActor,
  r: { method: string; path: string; requestId: string; body: unknown; status: number },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* Effect.promise(() =>
      recordAudit(sql, actor, {
        action: `route.${r.method.toLowerCase()}`,
        target: `${r.method} ${r.path}`,
        after: { request_id: r.requestId, status: r.status, body: redactForAudit(r.body ?? null) },
      }),
    )
  })

export const auditPage = (tenantId: number, page: ListPage, action: string | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const { rows, next_cursor } = pageOf(
      yield* Effect.promise(() => listAudit(sql, tenantId, page, action)),
      page.limit,
    )
    return {
      events: rows.map((r) => ({
        id: r.id,
        at: r.at.toISOString(),
        actor: r.actor,
        actor_email: r.actor_email,
        actor_role: r.actor_role,
        ip: r.ip,
        action: r.action,
        target: r.target,
        before: r.before,
        after: r.after,
      })),
      next_cursor,
    }
  })
