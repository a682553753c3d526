// A workspace's dial limits as an admin reads and sets them (POST/GET /api/internal/dial-limits):
// its plan's, its own, and what applies under the deployment's ceilings (before its carrier
// account's own rate, which the runtime applies per account).
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import type { Config } from "../platform/config.js"
import { query } from "../platform/Db.js"
import { NotFound } from "../platform/errors.js"
import { type DialCaps, type DialLimits, effectiveDialLimits, workspaceCaps } from "./dial-limits.js"
import * as repo from "./dial-limits.repo.js"

export interface CapsOut {
  readonly calls_per_second: number | null
  readonly max_concurrent_calls: number | null
  readonly max_concurrent_per_workflow: number | null
}

export interface DialLimitsView {
  readonly tenant_id: number
  readonly plan_tier: string
  readonly plan: CapsOut
  /** What an admin set for the workspace (null: the plan's apply). */
  readonly workspace: CapsOut | null
  readonly ceilings: CapsOut
  /** The plan's or the workspace's, under the ceilings; a carrier account may pace slower (telco_a). */
  readonly effective: CapsOut
}

const out = (c: DialCaps): CapsOut => ({
  calls_per_second: c.callsPerSecond,
  max_concurrent_calls: c.maxConcurrentCalls,
  max_concurrent_per_workflow: c.maxConcurrentPerWorkflow,
})

/** The deployment's ceilings (DIALER_* settings). */
export const dialCeilings = (config: Pick<Config, "dialer">): DialLimits => ({
  callsPerSecond: Math.min(config.dialer.cpsPerTenant, config.dialer.cpsPerCarrier),
  maxConcurrentCalls: config.dialer.maxConcurrentPerTenant,
  maxConcurrentPerWorkflow: config.dialer.maxConcurrentPerWorkflow,
})

const view = (tenantId: number, caps: repo.WorkspaceDialCaps, config: Config): DialLimitsView => {
  const ceilings = dialCeilings(config)
  return {
    tenant_id: tenantId,
    plan_tier: caps.planTier,
    plan: out(caps.plan),
    workspace: caps.own === undefined ? null : out(caps.own),
    ceilings: out(ceilings),
    effective: out(effectiveDialLimits([workspaceCaps(caps.plan, caps.own)], ceilings)),
  }
}

const notFound = (tenantId: number) => new NotFound({ message: `no workspace ${tenantId}` })

export const getDialLimits = (tenantId: number) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const caps = yield* query((sql) => repo.workspaceDialCaps(sql, tenantId))
    if (caps === undefined) return yield* Effect.fail(notFound(tenantId))
    return view(tenantId, caps, config)
  })

/** Sets the workspace's own limits (null: its plan's); runtime processes apply them within seconds. */
export const setDialLimits = (tenantId: number, caps: DialCaps) =>
  Effect.gen(function* () {
    const found = yield* query((sql) => repo.setWorkspaceDialCaps(sql, tenantId, caps))
    if (!found) return yield* Effect.fail(notFound(tenantId))
    return yield* getDialLimits(tenantId)
  })

/** Drops the workspace's own limits: its plan's apply again. */
export const clearDialLimits = (tenantId: number) =>
  Effect.gen(function* () {
    yield* query((sql) => repo.clearWorkspaceDialCaps(sql, tenantId))
    return yield* getDialLimits(tenantId)
  })
