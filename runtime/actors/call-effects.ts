// One run's calls: the call machine with this run's effects (reserve funds, place the call,
// converse: call-conversation.ts, leave a message, hang up, settle), a call actor per attempt whose
// end attempt-end.ts records, a patch-in to an operator, and the finalising of calls a dead owner
// left behind.
import { createActor, fromCallback, fromPromise, waitFor } from "xstate"
import {
  type ApprovalRequest,
  type CallOutput,
  type ConverseInboundEvent,
  callMachine,
  type HandOffInput,
  type HandOffOutput,
  type HangUpInput,
  type HangUpOutput,
  type LineInput,
  type ReserveFundsInput,
  type SettleInput,
} from "../../machines/index.js"
import * as calls from "../../src/calls/calls.repo.js"
import { Decision } from "../../src/dialing/dialer.policy.js"
import { retryOnDisconnect } from "../../src/platform/Db.js"
import type { CallHandoffReply } from "../../src/platform/subjects.js"
import type { DueTarget } from "../../src/runs/run-targets.repo.js"
import { endAttempt } from "./attempt-end.js"
import { converseOn } from "./call-conversation.js"
import type { Attempt } from "./dialer.js"
import { reportingHangups } from "./hangups.js"
import type { CallVariant } from "./run-experiment.js"
import { billedSeconds, type CallActor, type LiveCall, type RunScope, realHoldMs } from "./run-scope.js"

type ProvidedCallMachine = ReturnType<typeof callMachine.provide>

/** Orphaned calls finalised per transaction when a run is taken over. */
const TAKEOVER_GROUP = 500

export class CallEffects {
  private provided: ProvidedCallMachine | undefined

  constructor(
    private readonly scope: RunScope,
    private readonly requestApproval: (live: LiveCall, req: ApprovalRequest) => Promise<void>,
  ) {}

  /**
   * Finalises the calls a dead owner left in flight: each is charged once and never dialed again.
   * Written in groups (one adopting statement, the settlements grouped by the money batcher, one
   * finishAttempts transaction per TAKEOVER_GROUP calls): a dead process may have held thousands.
   */
  async takeOver(previousOwner: string): Promise<void> {
    const s = this.scope
    const { sql, me, log, settings, money } = s.deps
    const orphans = await calls.orphanCalls(sql, s.runId, me)
    log.warn({ run_id: s.runId, previous_owner: previousOwner, orphans: orphans.length }, "taking over run")
    for (let i = 0; i < orphans.length; i += TAKEOVER_GROUP) {
      const group = orphans.slice(i, i + TAKEOVER_GROUP)
      await calls.adoptCalls(
        sql,
        group.map((c) => Number(c.id)),
        me,
      )
      const ends = await Promise.all(
        group.map(async (c): Promise<calls.AttemptEnd> => {
          // Bill what we know happened: from the answer to the last recorded turn.
          const until = c.last_turn_at ?? c.answered_at
          const seconds =
            c.answered_at === null || until === null
              ? 0
              : billedSeconds(
                  until.getTime() - c.answered_at.getTime(),
                  settings.timeScale,
                  0,
                  s.ruleBook.max_call_seconds,
                )
          const settled = await money.settle(`call:${c.id}`, seconds)
          const at = Date.now()
          const detail = { previous_owner: previousOwner, call_id: c.id }
          return {
            me,
            runId: s.runId,
            tenantId: s.tenantId,
            callId: c.id,
            runTargetId: c.run_target_id,
            outcome: "interrupted",
            connectedSeconds: seconds,
            costMinor: settled?.chargedMinor ?? null,
            reservedMinor: null,
            endedAt: new Date(at),
            next: { kind: "done", outcome: "interrupted" },
            decision: Decision.stop(c.target_id, at, "owner_lost", detail, settled?.chargedMinor ?? null),
            addToDnc: false,
            phone: c.phone_e164,
          }
        }),
      )
      await calls.finishAttempts(sql, ends)
    }
  }

  /**
   * The call machine with this run's effects, made once per run: providing a machine builds its
   * whole state tree again, which per call cost more heap than the call itself. The effects find
   * their call by id.
   */
  private machine(): ProvidedCallMachine {
    if (this.provided !== undefined) return this.provided
    const s = this.scope
    const { settings, money, telephony, sql, log } = s.deps
    const scale = Math.max(settings.timeScale, 0.001)
    const liveOf = (callId: number): LiveCall => {
      const live = s.calls.get(callId)
      if (live === undefined) throw new Error(`call ${callId} is not live in this process`)
      return live
    }
    // Answers are written together: those that come while one write is in flight go in the next.
    let answers: Array<{ callId: number; at: Date }> = []
    let writing = false
    const writeAnswers = async (): Promise<void> => {
      writing = true
      while (answers.length > 0) {
        const batch = answers
        answers = []
        await retryOnDisconnect(() => calls.markAnsweredMany(sql, batch)).catch((err: unknown) =>
          log.error({ err, calls: batch.length }, "could not record answers"),
        )
      }
      writing = false
    }
    const recordAnswer = (callId: number, at: number) => {
      answers.push({ callId, at: new Date(at) })
      if (!writing) void writeAnswers()
    }
    this.provided = callMachine.provide({
      actors: {
        reserveFunds: fromPromise<void, ReserveFundsInput>(async ({ input }) => {
          // Grouped with the other calls starting now (runtime/host/call-money.ts, wired by the host).
          const r = await money.reserve(
            input.tenantId,
            `call:${input.callId}`,
            input.expectedSeconds,
            s.speech?.platformParts,
          )
          if (!r.ok) throw new Error("insufficient_funds")
          liveOf(input.callId).reservedMinor = r.reservedMinor
        }),
        placeCall: fromCallback<{ type: string }, LineInput>(({ sendBack, input }) => {
          const live = liveOf(input.callId)
          const call = { callId: input.callId, to: input.phone, from: null, tenantId: input.tenantId }
          const leg = telephony.dial(call, (e) => {
            if (e.type === "ANSWERED") {
              if (e.by === "human") {
                live.answeredAtMs = e.at
                s.run.send({ type: "CALL_CONNECTED" })
                recordAnswer(input.callId, e.at)
              }
              sendBack({ type: "ANSWERED", by: e.by, at: e.at })
            } else if (e.type === "FAILED") sendBack({ type: "FAILED", reason: e.reason })
            else if (e.type !== "HANGUP") sendBack({ type: e.type })
          })
          // Whoever hangs it up, a hang-up the carrier did not take is logged, counted and swept (hangups.ts).
          const carrierLeg = reportingHangups(
            leg,
            { callId: input.callId, runId: s.runId, tenantId: input.tenantId, provider: telephony.name },
            { sql, log },
          )
          // A call whose audio is on a media stream is spoken and heard by the voice pipeline.
          const voice = s.deps.voice
          live.leg =
            leg.mediaStream === true && voice !== undefined
              ? voice.audioLeg(
                  {
                    tenantId: input.tenantId,
                    callId: input.callId,
                    listening: live.variant.ruleBook.listening,
                    speech: s.speech,
                    record: live.variant.records,
                    providerFailed: (f) =>
                      void calls
                        .recordProviderFailure(s.deps.sql, input.callId, { ...f, at: new Date() })
                        .catch((err: unknown) =>
                          s.deps.log.warn({ err, call_id: input.callId }, "could not record a vendor's failure"),
                        ),
                  },
                  carrierLeg,
                  live.variant.voice,
                  leg,
                )
              : carrierLeg
          return () => {}
        }),
        converse: fromCallback<ConverseInboundEvent, LineInput>(({ sendBack, receive, input }) => {
          const live = liveOf(input.callId)
          const stop = new AbortController()
          receive((e) => {
            const resolve = live.pendingDecision
            live.pendingDecision = undefined
            if (e.type === "APPROVAL_TIMEOUT" && e.approvalId !== null) live.heldOut.push(e.approvalId)
            resolve?.(
              e.type === "APPROVAL_DECIDED" ? { status: e.decision, value_minor: e.valueMinor } : { status: "timeout" },
            )
          })
          void converseOn(s, live, input, stop.signal, "human", (e) => sendBack(e))
          return () => stop.abort()
        }),
        leaveMessage: fromPromise<void, LineInput>(async ({ input, signal }) => {
          await converseOn(s, liveOf(input.callId), input, signal, "machine", () => {})
        }),
        // The conversation stopped on leaving `connected`; the leg joins the conference and drops.
        handOff: fromPromise<HandOffOutput, HandOffInput>(async ({ input }) => {
          const leg = liveOf(input.callId).leg
          if (leg?.handoff === undefined) throw new Error("this carrier's calls cannot be handed off")
          const { conference_id } = await leg.handoff(input.operatorNumber)
          return { conferenceId: conference_id, at: Date.now() }
        }),
        // The leg's hang-up never rejects: a failure is recorded by reportingHangups.
        hangUp: fromPromise<HangUpOutput, HangUpInput>(async ({ input }) => {
          await s.calls.get(input.callId)?.leg?.hangup()
          return { at: Date.now() }
        }),
        settle: fromPromise<void, SettleInput>(async ({ input }) => {
          const live = liveOf(input.callId)
          const seconds =
            live.answeredAtMs === null
              ? 0
              : billedSeconds(
                  Date.now() - live.answeredAtMs,
                  settings.timeScale,
                  live.turns,
                  live.variant.ruleBook.max_call_seconds,
                )
          // Grouped with the other calls ending now (runtime/host/call-money.ts, wired by the host): one
          // transaction per group, so a burst of endings takes one connection, not one per call.
          const r = await money.settle(`call:${input.callId}`, seconds)
          live.chargedMinor = r?.chargedMinor ?? 0
        }),
      },
      actions: {
        requestApproval: (_, params: ApprovalRequest) => {
          const live = s.calls.get(params.callId)
          if (live !== undefined) void this.requestApproval(live, params)
        },
      },
      delays: {
        ringTimeout: settings.ringTimeoutMs * scale,
        maxCall: s.ruleBook.max_call_seconds * 1000 * scale,
        approvalHold: realHoldMs(settings),
      },
    })
    return this.provided
  }

  /** Starts the call actor of an attempt that began in Postgres. */
  start(t: DueTarget, a: Attempt, variant: CallVariant): void {
    const s = this.scope
    const { settings, log } = s.deps
    const scale = Math.max(settings.timeScale, 0.001)
    const live: LiveCall = {
      actor: undefined as never,
      runTargetId: t.id,
      targetId: a.targetId,
      phone: a.phone,
      name: t.name,
      attempt: a.attempt,
      variant,
      leg: undefined,
      answeredAtMs: null,
      reservedMinor: null,
      chargedMinor: null,
      turns: 0,
      recent: [],
      pendingDecision: undefined,
      heldOut: [],
    }
    const actor = createActor(this.machine(), {
      clock: s.deps.timers,
      input: {
        callId: a.callId,
        runId: s.runId,
        tenantId: s.tenantId,
        targetId: a.targetId,
        phone: a.phone,
        attempt: a.attempt,
        expectedSeconds: variant.ruleBook.max_call_seconds,
        maxCallMs: variant.ruleBook.max_call_seconds * 1000 * scale,
        ringTimeoutMs: settings.ringTimeoutMs * scale,
        approvalHoldMs: realHoldMs(settings),
        voicemail: variant.ruleBook.voicemail,
      },
    })
    ;(live as { actor: CallActor }).actor = actor
    s.calls.set(a.callId, live)
    actor.subscribe({
      complete: () => {
        // A call stopped without finishing (its run moved to another process) ends there, not here.
        const output = actor.getSnapshot().output as CallOutput | undefined
        if (output !== undefined) void endAttempt(s, a.callId, live, output)
      },
      error: (err) => {
        log.error({ err, call_id: a.callId }, "call actor failed")
        const failed: CallOutput = {
          callId: a.callId,
          outcome: "failed",
          connectedSeconds: 0,
          answered: false,
          retryable: false,
          funded: true,
          settled: false,
          turns: live.turns,
        }
        void endAttempt(s, a.callId, live, failed)
      },
    })
    actor.start()
  }

  /**
   * Patch-in: sends HANDOFF to the call actor and answers once the conference is set up (or failed).
   * Refused when the callee is not talking to the agent (dialing, voicemail, ending) or already handed off.
   */
  async handOff(callId: number, operatorNumber: string): Promise<CallHandoffReply> {
    const live = this.scope.calls.get(callId)
    if (live === undefined) return { status: "refused", reason: "not_live" }
    const event = { type: "HANDOFF", operatorNumber } as const
    const snap = live.actor.getSnapshot()
    if (snap.matches("handingOff") || snap.context.outcome === "handed_off")
      return { status: "refused", reason: "handed_off" }
    if (!snap.can(event)) return { status: "refused", reason: "not_live" }
    live.actor.send(event)
    try {
      const after = await waitFor(live.actor, (s) => !s.matches("handingOff"), { timeout: 60_000 })
      if (after.context.outcome === "handed_off" && after.context.conferenceId !== null)
        return { status: "handed_off", conference_id: after.context.conferenceId }
      return { status: "refused", reason: "failed", message: after.context.failureReason ?? "handoff failed" }
    } catch (err) {
      return { status: "refused", reason: "failed", message: err instanceof Error ? err.message : String(err) }
    }
  }
}
