// Starting, resuming and pausing runs, as api processes decide them (readiness and the wallet are
// checked, the change is made in Postgres under the workflow's row lock, and then the runtime
// processes are told over the bus, which also find the change on their own if the message is lost),
// and a workflow's runs as GET /api/workflows/{id}/runs lists them.
import { Effect } from "effect"
import { ownerEmailVerified } from "../auth/auth.repo.js"
import { DEFAULT_PRECHECK_SECONDS, precheck } from "../billing/wallet.service.js"
import { publishOrWarn } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Conflict, Forbidden, InsufficientFunds, NotFound } from "../platform/errors.js"
import { type ListPage, pageOf } from "../platform/page.cursor.js"
import { RT_RUN_CONTROL, RT_RUN_WAKE, type RunControl } from "../platform/subjects.js"
import { runObject } from "../webhooks/event-data.js"
import { readinessGaps } from "../workflows/readiness.js"
import { findWorkflowDetail, setWorkflowStatus } from "../workflows/workflows.repo.js"
import * as repo from "./runs.repo.js"

export type { ReadinessGap } from "../workflows/readiness.js"

const workflowNotFound = (id: number) => new NotFound({ message: `workflow ${id} not found` })

class Refused {
  constructor(readonly error: Conflict | NotFound) {}
}

const notify = (subject: string, payload: RunControl) =>
  Effect.gen(function* () {
    // Best effort: runtime processes also poll Postgres, so a lost message only delays the change.
    yield* publishOrWarn(subject, payload, "runtime notification not sent")
  })

/**
 * POST /api/workflows/{id}/run. A ready draft or paused workflow goes live: a paused run resumes
 * with its run_id, otherwise a new run is created over the whole audience.
 */
export const startRun = (tenantId: number, workflowId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const wallet = yield* precheck(tenantId, DEFAULT_PRECHECK_SECONDS)
    const outcome = yield* Effect.promise(() =>
      sql
        .begin(async (tx) => {
          const gate = await repo.lockRunGate(tx, tenantId, workflowId)
          if (gate === undefined) throw new Refused(workflowNotFound(workflowId))
          if (gate.status === "retired")
            throw new Refused(new Conflict({ code: "WORKFLOW_RETIRED", message: `workflow ${workflowId} is retired` }))
          if (gate.running_run_id !== null)
            throw new Refused(
              new Conflict({
                code: "RUN_IN_PROGRESS",
                message: `run ${gate.running_run_id} is already running`,
                details: { run_id: gate.running_run_id },
              }),
            )
          const missing = readinessGaps(gate, await ownerEmailVerified(tx, tenantId))
          if (missing.length > 0)
            throw new Refused(
              new Conflict({
                code: "WORKFLOW_NOT_READY",
                message: `workflow ${workflowId} is not ready to run: missing ${missing.join(", ")}`,
                details: { missing },
              }),
            )
          if (wallet.status !== "ok") return { wallet: wallet.status }
          const run =
            gate.status === "paused" && gate.paused_run_id !== null
              ? { ...(await repo.resumeRun(tx, gate.paused_run_id)), resumed: true }
              : { ...(await repo.insertRun(tx, tenantId, workflowId, gate.rule_book_id!)), resumed: false }
          await setWorkflowStatus(tx, workflowId, "live")
          return { run }
        })
        .catch((e: unknown) => {
          if (e instanceof Refused) return { refused: e.error }
          throw e
        }),
    )
    if ("refused" in outcome) return yield* Effect.fail(outcome.refused)
    if ("wallet" in outcome) {
      if (outcome.wallet === "account_suspended")
        return yield* Effect.fail(new Forbidden({ code: "ACCOUNT_INACTIVE", message: "this workspace is suspended" }))
      return yield* Effect.fail(
        new InsufficientFunds({
          message:
            outcome.wallet === "trial_expired"
              ? "the free trial has ended: top up the wallet to start a run"
              : `the wallet cannot pay for one ${DEFAULT_PRECHECK_SECONDS}-second call: top up to start a run${
                  wallet.byok_missing === undefined
                    ? ""
                    : " (calls are billed at the bundled rate until byok is complete: " +
                      `missing ${wallet.byok_missing.join(", ")})`
                }`,
          balanceMinor: wallet.balance_minor,
          requiredMinor: wallet.required_minor,
        }),
      )
    }
    const { run } = outcome
    yield* notify(RT_RUN_WAKE, { run_id: run.id, tenant_id: tenantId, command: run.resumed ? "resume" : "start" })
    return {
      run_id: run.id,
      status: "running" as const,
      targets_queued: run.queued,
      resumed: run.resumed,
      workflow_id: workflowId,
    }
  })

/** POST /api/workflows/{id}/pause: queued targets stop at once; calls in flight finish. */
export const pauseRun = (tenantId: number, workflowId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const outcome = yield* Effect.promise(() =>
      sql
        .begin(async (tx) => {
          const gate = await repo.lockRunGate(tx, tenantId, workflowId)
          if (gate === undefined) throw new Refused(workflowNotFound(workflowId))
          if (gate.status === "paused") return { runId: gate.paused_run_id, changed: false }
          if (gate.status !== "live")
            throw new Refused(
              new Conflict({
                code: "WORKFLOW_NOT_LIVE",
                message: `workflow ${workflowId} is ${gate.status}, not live`,
              }),
            )
          const runId = await repo.pauseRunningRun(tx, workflowId, "user")
          await setWorkflowStatus(tx, workflowId, "paused")
          return { runId: runId ?? null, changed: true }
        })
        .catch((e: unknown) => {
          if (e instanceof Refused) return { refused: e.error }
          throw e
        }),
    )
    if ("refused" in outcome) return yield* Effect.fail(outcome.refused)
    if (outcome.changed && outcome.runId !== null)
      yield* notify(RT_RUN_CONTROL, { run_id: outcome.runId, tenant_id: tenantId, command: "pause" })
    return {
      workflow_id: workflowId,
      status: "paused" as const,
      run_id: outcome.runId,
      run_status: outcome.runId === null ? null : "paused",
    }
  })

/** GET /api/workflows/{id}/runs: one page of the workflow's runs and the cursor of the next. */
export const listRuns = (tenantId: number, id: number, page: ListPage) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const w = yield* Effect.promise(() => findWorkflowDetail(sql, tenantId, id))
    if (w === undefined) return yield* Effect.fail(workflowNotFound(id))
    const { rows, next_cursor } = pageOf(yield* Effect.promise(() => repo.listRuns(sql, id, page)), page.limit)
    return {
      runs: rows.map(runObject),
      next_cursor,
    }
  })
