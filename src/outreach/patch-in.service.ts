// Patch-in: a live call's callee is moved into a recorded conference with an operator, and the
// agent's leg drops. The api decides what it can from Postgres (unknown, finished, already handed
// off), then asks the runtime process holding the call over the bus (rtCallHandoff). The internal
// patch-in and a supervisor's take-over (src/calls/take-over.service.ts) both go this way.
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { Conflict, GatewayUnavailable, NotFound, ValidationFailed } from "../platform/errors.js"
import { type CallHandoffReply, type CallHandoffRequest, rtCallHandoff } from "../platform/subjects.js"
import { callOfTenant } from "./outreach.repo.js"

/** How long the api waits for the holder to set the conference up (the operator's phone rings meanwhile). */
const HANDOFF_WAIT_MS = 60_000

export interface PatchInResult {
  readonly call_id: number
  readonly run_id: number
  readonly status: "handed_off"
  readonly conference_id: string
  readonly operator_number: string
  readonly recorded: true
}

export interface PatchInOptions {
  /**
   * How a call of the workspace that is no longer live (ended, or held by no runtime process) is
   * refused: `not_found` as for an unknown call (the internal patch-in, 404), or `conflict`
   * (409 CALL_NOT_LIVE: a supervisor's take-over of a call they saw live, POST /api/calls/{id}/take-over).
   */
  readonly notLive: "not_found" | "conflict"
}

const notFound = (callId: number) => new NotFound({ message: `call ${callId} is not a live call of this workspace` })
const handedOff = (callId: number) =>
  new Conflict({ message: `call ${callId} was already handed off`, code: "CALL_HANDED_OFF" })

export const patchIn = (
  tenantId: number,
  callId: number,
  operatorNumber: string | undefined,
  options: PatchInOptions = { notLive: "not_found" },
) =>
  Effect.gen(function* () {
    const notLive = () =>
      options.notLive === "not_found"
        ? notFound(callId)
        : new Conflict({ message: `call ${callId} has ended: it can no longer be handed off`, code: "CALL_NOT_LIVE" })
    const { sql } = yield* Db
    const bus = yield* Bus
    const config = yield* AppConfig
    const operator = operatorNumber ?? config.operatorNumber
    if (operator === undefined)
      return yield* Effect.fail(
        new ValidationFailed({
          message: "operator_number is required (no OPERATOR_NUMBER is configured)",
          errors: [{ field: "operator_number", message: "is required: no default (OPERATOR_NUMBER) is configured" }],
        }),
      )
    const call = yield* Effect.promise(() => callOfTenant(sql, tenantId, callId))
    if (call === undefined) return yield* Effect.fail(notFound(callId))
    if (call.outcome === "handed_off") return yield* Effect.fail(handedOff(callId))
    if (call.status === "ended") return yield* Effect.fail(notLive())
    const request: CallHandoffRequest = { call_id: callId, tenant_id: tenantId, operator_number: operator }
    // No reply (nobody holds the call: its process died, or it just ended) is a call that is not live.
    const reply = yield* Effect.promise(() =>
      bus.request(rtCallHandoff(callId), request, { timeoutMs: HANDOFF_WAIT_MS }).then(
        (m) => m.json<CallHandoffReply>(),
        () => undefined,
      ),
    )
    if (reply === undefined) return yield* Effect.fail(notLive())
    if (reply.status === "refused") {
      if (reply.reason === "handed_off") return yield* Effect.fail(handedOff(callId))
      if (reply.reason === "failed")
        return yield* Effect.fail(
          new GatewayUnavailable({ message: `the conference could not be set up: ${reply.message ?? "failed"}` }),
        )
      return yield* Effect.fail(
        new Conflict({ message: `call ${callId} is not connected to a person; it cannot be handed off yet` }),
      )
    }
    const result: PatchInResult = {
      call_id: callId,
      run_id: call.run_id,
      status: "handed_off",
      conference_id: reply.conference_id,
      operator_number: operator,
      recorded: true,
    }
    return result
  })
