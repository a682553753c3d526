// Hang-ups the carrier did not take. A call's leg is wrapped (reportingHangups) so that whoever hangs
// it up (the call machine, the conversation, an erase, a lost lease, shutdown) never drops a failure:
// it is logged with the call's context, counted (parley_call_hangup_failures_total) and marked on the
// call row (calls.hangup_state), where sweepHangups, run by every runtime process, tries again until
// the carrier takes it or HANGUP_GIVE_UP_MS has passed, reporting each call that stays up.
import type { Logger } from "pino"
import * as calls from "../../src/calls/calls.repo.js"
import { retryOnDisconnect, type Sql } from "../../src/platform/Db.js"
import { ProviderCallError } from "../../src/providers/http.util.js"
import {
  type CallLeg,
  HangupFailed,
  type TelephonyProvider,
} from "../../src/providers/telephony/telephony.interface.js"
import { hangupFailures, hangupsSwept } from "../runtime.metrics.js"

/** How often the sweep looks, and how long a failed hang-up waits before it is tried again. */
export const HANGUP_SWEEP_MS = 30_000
/** A carrier's call ends on its own in the end (its limits, the callee): past this the sweep stops trying. */
export const HANGUP_GIVE_UP_MS = 60 * 60_000
/** Hang-ups one pass takes at most (the rest wait for the next). */
const SWEEP_BATCH = 50

/** The call a leg belongs to, for the log line, the metric's label and the mark. */
export interface HangupContext {
  readonly callId: number
  readonly runId: number
  readonly tenantId: number
  /** The carrier's name (TelephonyProvider.name): the metric's label. */
  readonly provider: string
}

interface Deps {
  readonly sql: Sql
  readonly log: Logger
}

/** A failure as a code fit for a log line or a metric: never the carrier's words, which may quote a request. */
const codeOf = (e: unknown): string =>
  e instanceof ProviderCallError ? (e.status === undefined ? "unreachable" : `http_${e.status}`) : "error"

/** `leg`, whose hang-ups never reject: a failure is logged, counted and marked for the sweep. */
export function reportingHangups(leg: CallLeg, call: HangupContext, deps: Deps): CallLeg {
  const report = async (e: unknown, reason: "hangup" | "handoff"): Promise<void> => {
    const providerCallId = e instanceof HangupFailed ? e.providerCallId : leg.providerCallId
    const code = codeOf(e)
    hangupFailures.labels(call.provider, reason).inc()
    deps.log.error(
      {
        call_id: call.callId,
        run_id: call.runId,
        tenant_id: call.tenantId,
        provider: call.provider,
        provider_call_id: providerCallId,
        code,
        reason,
      },
      "the carrier did not take a hang-up: the call may still be up; marked for the sweep",
    )
    await retryOnDisconnect(() =>
      calls.markHangupPending(deps.sql, {
        callId: call.callId,
        providerCallId: providerCallId === "" ? null : providerCallId,
        error: code,
        retryAt: new Date(Date.now() + HANGUP_SWEEP_MS),
      }),
    ).catch((err: unknown) =>
      deps.log.error({ err, call_id: call.callId }, "could not mark a failed hang-up: the sweep will not see it"),
    )
  }
  const handoff = leg.handoff?.bind(leg)
  return {
    get providerCallId() {
      return leg.providerCallId
    },
    get mediaStream() {
      return leg.mediaStream === true
    },
    reportsPlayed: leg.reportsPlayed === true,
    say: (text) => leg.say(text),
    listen: () => leg.listen(),
    hangup: () => leg.hangup().catch((e: unknown) => report(e, "hangup")),
    ...(handoff !== undefined && {
      handoff: (operatorNumber: string) =>
        handoff(operatorNumber).catch(async (e: unknown) => {
          if (!(e instanceof HangupFailed)) throw e
          await report(e, "handoff")
          throw e.after ?? e
        }),
    }),
  }
}

export interface SweepOptions {
  /** The sweep's now (tests look ahead); default the clock's. */
  readonly asOf?: Date
  /** How long a hang-up that fails again waits for the next try; default HANGUP_SWEEP_MS. */
  readonly retryEveryMs?: number
  /** How long after the first failure the sweep stops trying; default HANGUP_GIVE_UP_MS. */
  readonly giveUpAfterMs?: number
}

/**
 * One pass: each pending hang-up that is due is tried again through its workspace's carrier. One
 * that goes through is marked swept; one that fails again waits for the next pass, or, past the
 * give-up time (or with no carrier id or no carrier to ask), is abandoned: logged as an error.
 */
export async function sweepHangups(
  deps: Deps & { readonly telephonyFor: (tenantId: number) => Promise<TelephonyProvider> },
  o: SweepOptions = {},
): Promise<void> {
  const { sql, log } = deps
  const asOf = o.asOf ?? new Date()
  const nextAt = new Date(asOf.getTime() + (o.retryEveryMs ?? HANGUP_SWEEP_MS))
  const giveUpAfterMs = o.giveUpAfterMs ?? HANGUP_GIVE_UP_MS
  for (const c of await calls.takeDueHangups(sql, asOf, nextAt, SWEEP_BATCH)) {
    const context = {
      call_id: c.id,
      run_id: c.run_id,
      tenant_id: c.tenant_id,
      provider: c.provider,
      provider_call_id: c.provider_call_id,
    }
    // undefined: the carrier took it.
    let code: string | undefined
    if (c.provider_call_id === null) code = "no_call_id"
    else
      try {
        const carrier = await deps.telephonyFor(c.tenant_id)
        if (carrier.name !== c.provider || carrier.hangupCall === undefined) code = "no_carrier"
        else await carrier.hangupCall(c.provider_call_id)
      } catch (e) {
        code = codeOf(e)
      }
    if (code === undefined) {
      await calls.recordHangupTry(sql, c.id, { state: "swept" })
      hangupsSwept.labels(c.provider).inc()
      log.info({ ...context, failures: c.hangup_failures }, "the sweep hung up a call the carrier had kept up")
      continue
    }
    const giveUp =
      code === "no_call_id" || code === "no_carrier" || asOf.getTime() - c.hangup_failed_at.getTime() >= giveUpAfterMs
    await calls.recordHangupTry(sql, c.id, { state: giveUp ? "abandoned" : "pending", error: code })
    hangupFailures.labels(c.provider, giveUp ? "given_up" : "sweep").inc()
    if (giveUp)
      log.error(
        { ...context, code, failures: c.hangup_failures + 1 },
        "gave up hanging up a call: it may have stayed up",
      )
    else
      log.warn(
        { ...context, code, failures: c.hangup_failures + 1 },
        "the carrier still did not take a hang-up; tried again later",
      )
  }
}
