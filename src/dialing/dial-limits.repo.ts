// SQL of dial limits (migrations/0026): the plans' (dial_plans, read-only here) and a workspace's
// own (tenant_dial_limits), the only file that writes them.
import type { Sql } from "../platform/Db.js"
import type { DialCaps } from "./dial-limits.js"

interface CapsRow {
  readonly calls_per_second: string | number | null
  readonly max_concurrent_calls: number | null
  readonly max_concurrent_per_workflow: number | null
}

const capsOf = (r: CapsRow | undefined): DialCaps | undefined =>
  r === undefined
    ? undefined
    : {
        callsPerSecond: r.calls_per_second === null ? null : Number(r.calls_per_second),
        maxConcurrentCalls: r.max_concurrent_calls,
        maxConcurrentPerWorkflow: r.max_concurrent_per_workflow,
      }

export interface WorkspaceDialCaps {
  readonly planTier: string
  /** The plan's limits (none: a tier without a dial_plans row). */
  readonly plan: DialCaps
  /** The limits an admin set for the workspace (undefined: none). */
  readonly own: DialCaps | undefined
}

const NONE: DialCaps = { callsPerSecond: null, maxConcurrentCalls: null, maxConcurrentPerWorkflow: null }

/** A workspace's plan and own limits; undefined when there is no such workspace. */
export const workspaceDialCaps = async (sql: Sql, tenantId: number): Promise<WorkspaceDialCaps | undefined> => {
  const [row] = await sql<
    [
      {
        plan_tier: string
        p_cps: string | null
        p_max: number | null
        p_wf: number | null
        own: boolean
        o_cps: string | null
        o_max: number | null
        o_wf: number | null
      }?,
    ]
  >`
    select t.plan_tier, p.calls_per_second as p_cps, p.max_concurrent_calls as p_max,
      p.max_concurrent_per_workflow as p_wf, (l.tenant_id is not null) as own, l.calls_per_second as o_cps,
      l.max_concurrent_calls as o_max, l.max_concurrent_per_workflow as o_wf
    from tenants t
    left join dial_plans p on p.plan_tier = t.plan_tier
    left join tenant_dial_limits l on l.tenant_id = t.id
    where t.id = ${tenantId}`
  if (row === undefined) return undefined
  return {
    planTier: row.plan_tier,
    plan:
      capsOf({ calls_per_second: row.p_cps, max_concurrent_calls: row.p_max, max_concurrent_per_workflow: row.p_wf }) ??
      NONE,
    own: row.own
      ? capsOf({ calls_per_second: row.o_cps, max_concurrent_calls: row.o_max, max_concurrent_per_workflow: row.o_wf })
      : undefined,
  }
}

/** Sets a workspace's own limits (null: the plan's applies); false when there is no such workspace. */
export const setWorkspaceDialCaps = async (sql: Sql, tenantId: number, caps: DialCaps): Promise<boolean> => {
  const rows = await sql`
    insert into tenant_dial_limits (tenant_id, calls_per_second, max_concurrent_calls, max_concurrent_per_workflow)
    select t.id, ${caps.callsPerSecond}, ${caps.maxConcurrentCalls}, ${caps.maxConcurrentPerWorkflow}
    from tenants t where t.id = ${tenantId}
    on conflict (tenant_id) do update set calls_per_second = excluded.calls_per_second,
      max_concurrent_calls = excluded.max_concurrent_calls,
      max_concurrent_per_workflow = excluded.max_concurrent_per_workflow, updated_at = now()`
  return rows.count > 0
}

/** Drops a workspace's own limits: its plan's apply again. */
export const clearWorkspaceDialCaps = async (sql: Sql, tenantId: number): Promise<void> => {
  await sql`delete from tenant_dial_limits where tenant_id = ${tenantId}`
}
