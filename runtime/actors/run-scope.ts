// What the parts of one owned run share: the host's dependencies, the run's setup, its run actor
// and the calls in flight. RunDriver (run-driver.ts) holds it; the dialer, the call effects, the
// approvals and the snapshot persistence each work on it.

import type { Logger } from "pino"
import type { Actor } from "xstate"
import type { callMachine, runMachine } from "../../machines/index.js"
import type { HostedSpeechPart } from "../../src/billing/pricing.js"
import type { DialLimits } from "../../src/dialing/dial-limits.js"
import type { Pacer, SlotCounter } from "../../src/dialing/pacing.js"
import type { BusClient } from "../../src/platform/bus/bus.js"
import type { Sql } from "../../src/platform/Db.js"
import type { FairClock } from "../../src/platform/fair-timers.js"
import type { Currency } from "../../src/platform/money.js"
import type { AgentRule, ApprovalAnswer, LanguageModel } from "../../src/providers/llm/llm.interface.js"
import type { PhoneVoice } from "../../src/providers/speech/streaming.interface.js"
import type { CallLeg, TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import type { RuleBook } from "../../src/workflows/rulebook.schema.js"
import type { Schedule } from "../../src/workflows/workflow.schema.js"
import type { HostedSpeech } from "../voice/hosted-speech.js"
import type { VoiceRuntime } from "../voice/voice-runtime.js"
import type { CallVariant } from "./run-experiment.js"
import type { TurnSink } from "./turns.js"

/** What the dialer needs from the process that hosts it. */
export interface DriverDeps {
  /** Calls heard as audio (MEDIA_STREAMS): a leg on a media stream is spoken and heard through it. */
  readonly voice?: VoiceRuntime
  readonly sql: Sql
  readonly bus: BusClient
  readonly log: Logger
  readonly llm: LanguageModel
  readonly telephony: TelephonyProvider
  /** The pacing key of the carrier account this run's calls go out on. */
  readonly carrierKey: string
  readonly me: string
  readonly pacer: Pacer
  readonly slots: SlotCounter
  readonly turns: TurnSink
  /** The call actors' clock: their delayed events due at once run in slices, with I/O between. */
  readonly timers: FairClock
  readonly settings: DialerSettings
  /**
   * The workspace's dial limits now (its carrier account's and plan's under the deployment's
   * ceilings, src/dialing/): the host refreshes `current` every few seconds.
   */
  readonly limits: { readonly current: DialLimits }
  /** Money, from the billing service: reserve before dialing, settle at hangup (both idempotent). */
  readonly money: {
    /** Whether the run's calls may be heard through the platform's hosted speech, paying for it. */
    readonly paysHostedSpeech: boolean
    /** `hostedSpeech`: the platform's hosted speech the call is heard through, priced with it. */
    reserve(
      tenantId: number,
      callRef: string,
      seconds: number,
      hostedSpeech?: readonly HostedSpeechPart[],
    ): Promise<{ ok: true; reservedMinor: number } | { ok: false }>
    settle(callRef: string, seconds: number): Promise<{ chargedMinor: number } | undefined>
  }
}

export interface DialerSettings {
  readonly timeScale: number
  readonly callingHoursAny: boolean
  readonly leaseMs: number
  /** DIALER_MAX_CONCURRENT_PER_*: ceilings only; the dialer follows `DriverDeps.limits`. */
  readonly perWorkflowConcurrency: number
  readonly perTenantConcurrency: number
  readonly maxAttempts: number
  readonly retryBackoffMs: number
  readonly ringTimeoutMs: number
  readonly approvalHoldMs: number
  /** APPROVAL_HOLD_FLOOR_MS: the least real time a held callee waits, whatever the time scale. */
  readonly approvalHoldFloorMs: number
  readonly approvalTtlMs: number
}

/**
 * How long, in real time, a held callee waits for a human: the hold scaled like the rest of the
 * call, but never under the floor (nor under the hold itself when that is shorter), so a person can
 * act at any simulator speed: at SIM_TIME_SCALE 0.1 the default 30 s hold is 20 s, not 3 s.
 */
export const realHoldMs = (s: DialerSettings): number =>
  Math.max(s.approvalHoldMs * Math.max(s.timeScale, 0.001), Math.min(s.approvalHoldMs, s.approvalHoldFloorMs))

export type CallActor = Actor<ReturnType<typeof callMachine.provide>>

export interface LiveCall {
  readonly actor: CallActor
  readonly runTargetId: number
  readonly targetId: number
  readonly phone: string
  /** The callee's name from the audience, for the agent to greet them by. */
  readonly name: string | null
  readonly attempt: number
  /** What the call follows: the run's rule book, voice and agent, or its experiment arm's. */
  readonly variant: CallVariant
  leg: CallLeg | undefined
  answeredAtMs: number | null
  reservedMinor: number | null
  chargedMinor: number | null
  turns: number
  /** The last few lines said, for an approval's context. */
  recent: string[]
  pendingDecision: ((d: ApprovalAnswer) => void) | undefined
  /** Approvals whose hold ran out on this call: a decision made meanwhile applies to the result at its end. */
  heldOut: number[]
}

/** One owned run as its parts see it. */
export interface RunScope {
  readonly deps: DriverDeps
  readonly runId: number
  readonly tenantId: number
  readonly workflowId: number
  readonly ruleBook: RuleBook
  readonly schedule: Schedule
  readonly scheduleKind: "immediate" | "window" | "once"
  readonly currency: Currency
  readonly company: string
  readonly agentName: string
  /** The voice a call heard as audio speaks with (the workflow's cloned voice or persona's), once loaded. */
  readonly voice: PhoneVoice
  /** The hosted recogniser and voice its audio calls use, once loaded (none: the offline engines). */
  readonly speech: HostedSpeech | undefined
  /**
   * A simulation campaign's run (src/rehearsals/): simulated callees are not people, so the dialer skips
   * the DNC, NCPR, cool-down and calling-window checks and writes no contact or DNC record for them.
   */
  readonly simulation: boolean
  /** Its calls heard as audio are recorded (the rule book discloses it and does not turn it off). */
  readonly records: boolean
  /** The run actor (set once the driver starts). */
  readonly run: Actor<typeof runMachine>
  /** Calls in flight, by call id. */
  readonly calls: Map<number, LiveCall>
  /** Dialing has stopped (the run ended, was released, or the process is shutting down). */
  readonly stopped: boolean
  /** Another process owns the run now: nothing more is written. */
  readonly lost: boolean
  /**
   * The knowledge-base rules that apply to the run now (workspace's and workflow's, by priority):
   * waits for a reload in flight, so a call that starts after a change was announced follows it.
   */
  agentRules(): Promise<ReadonlyArray<AgentRule>>
  /** What a target's call follows: its experiment arm's variant, else the run's. */
  variantFor(targetId: number): CallVariant
  /** Wakes the dial loop. */
  poke(): void
  /** Stops everything here without writing anything more. */
  loseLease(): void
}

/** Billed seconds are call-time seconds: real elapsed time divided by the simulator's time scale. */
export const billedSeconds = (elapsedMs: number, timeScale: number, turns: number, capSeconds: number): number => {
  if (elapsedMs <= 0) return 0
  const seconds = timeScale > 0 ? Math.ceil(elapsedMs / timeScale / 1000) : turns * 4
  return Math.max(1, Math.min(capSeconds, seconds))
}
