// POST /api/internal/outreach/call: one call to one person on the workspace's workflow, through the
// runtime as any run's. As the public demo does (src/demo/demo.service.ts), the call becomes a run
// of its own: a one-target live copy of the workflow (rule book, persona, schedule, compliance),
// woken like any run, so the dialer applies the workspace's rules (DNC, cool-down, calling window,
// pacing) and bills the call to its wallet. A rule that fails here is answered at once.
import { Effect } from "effect"
import { insertTarget } from "../audience/audience.repo.js"
import { ownerEmailVerified } from "../auth/auth.repo.js"
import { DEFAULT_PRECHECK_SECONDS, precheck } from "../billing/wallet.service.js"
import { checkDnc } from "../compliance/dnc.service.js"
import { type TenantCountry, toE164 } from "../phones/phone.js"
import { publishOrWarn } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Conflict, Forbidden, InsufficientFunds, NotFound, ValidationFailed } from "../platform/errors.js"
import { RT_RUN_WAKE, type RunControl } from "../platform/subjects.js"
import { insertRun } from "../runs/runs.repo.js"
import { findTenantContext, insertOutreachWorkflow } from "../workflows/workflows.repo.js"
import { outreachSource } from "./outreach.repo.js"

export interface OutreachCallRequest {
  readonly phone: string
  readonly name?: string | undefined
  readonly workflow_id?: number | undefined
}

export interface OutreachCallAccepted {
  /** Known once the dialer places the call (GET /api/runs/live?run_id= shows it); null here. */
  readonly call_id: number | null
  readonly run_id: number
  readonly workflow_id: number
  readonly source_workflow_id: number
  readonly phone_e164: string
  readonly status: "queued"
}

const phoneInvalid = (message: string) =>
  new ValidationFailed({ message: `phone: ${message}`, errors: [{ field: "phone", message }] })

export const placeOutreachCall = (tenantId: number, input: OutreachCallRequest) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* Effect.promise(() => findTenantContext(sql, tenantId))
    if (tenant === undefined) return yield* Effect.fail(new NotFound({ message: `workspace ${tenantId} not found` }))
    const phone = toE164(input.phone, tenant.country as TenantCountry)
    if (!phone.ok) return yield* Effect.fail(phoneInvalid(`must be a valid phone number (${phone.reason})`))

    const source = yield* Effect.promise(() => outreachSource(sql, tenantId, input.workflow_id))
    if (source === undefined)
      return yield* Effect.fail(
        input.workflow_id === undefined
          ? new Conflict({
              code: "WORKFLOW_NOT_READY",
              message: "the workspace has no workflow ready to call with (a rule book and a consent attestation)",
            })
          : new NotFound({ message: `workflow ${input.workflow_id} not found` }),
      )
    if (source.status === "retired")
      return yield* Effect.fail(new Conflict({ code: "WORKFLOW_RETIRED", message: `workflow ${source.id} is retired` }))
    // As a run's start (runs.service): the call is billed to the wallet, so the owner's email must be verified.
    const missing = [
      ...(source.rule_book_id === null ? ["rule_book"] : []),
      ...(source.attested ? [] : ["consent"]),
      ...((yield* Effect.promise(() => ownerEmailVerified(sql, tenantId))) ? [] : ["email_verified"]),
    ]
    if (missing.length > 0)
      return yield* Effect.fail(
        new Conflict({
          code: "WORKFLOW_NOT_READY",
          message: `workflow ${source.id} is not ready to call with: missing ${missing.join(", ")}`,
          details: { missing },
        }),
      )

    // Asked before the call is queued, so the caller hears why; the dialer applies them again when it dials.
    const dnc = yield* checkDnc(tenantId, phone.e164)
    if (dnc.on_dnc || dnc.on_ncpr)
      return yield* Effect.fail(
        phoneInvalid(dnc.on_dnc ? "this number is on the do-not-call list" : "this number is on the national registry"),
      )
    if (dnc.in_cooldown)
      return yield* Effect.fail(phoneInvalid("this number had a call in the last 7 days (cool-down)"))
    const wallet = yield* precheck(tenantId, DEFAULT_PRECHECK_SECONDS)
    if (wallet.status === "account_suspended")
      return yield* Effect.fail(new Forbidden({ code: "ACCOUNT_INACTIVE", message: "this workspace is suspended" }))
    if (wallet.status !== "ok")
      return yield* Effect.fail(
        new InsufficientFunds({
          message: `the wallet cannot pay for one ${DEFAULT_PRECHECK_SECONDS}-second call: top up first`,
          balanceMinor: wallet.balance_minor,
          requiredMinor: wallet.required_minor,
        }),
      )

    const label = input.name ?? phone.e164
    const placed = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const workflowId = await insertOutreachWorkflow(tx, {
            tenantId,
            ofWorkflowId: source.id,
            name: `Outreach call: ${label}`.slice(0, 200),
          })
          if (workflowId === undefined) throw new Error(`workflow ${source.id} vanished`)
          await insertTarget(tx, { tenantId, workflowId, phone: phone.e164, name: input.name ?? null })
          const run = await insertRun(tx, tenantId, workflowId, source.rule_book_id!)
          return { workflowId, runId: run.id }
        }) as Promise<{ workflowId: number; runId: number }>,
    )
    // Best effort, as for any run: runtime processes also look for unowned runs every second.
    const wake: RunControl = { run_id: placed.runId, tenant_id: tenantId, command: "start" }
    yield* publishOrWarn(RT_RUN_WAKE, wake, "outreach call wake-up not sent")
    const accepted: OutreachCallAccepted = {
      call_id: null,
      run_id: placed.runId,
      workflow_id: placed.workflowId,
      source_workflow_id: source.id,
      phone_e164: phone.e164,
      status: "queued",
    }
    return accepted
  })
