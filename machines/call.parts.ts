// The call machine's vocabulary: its input, context, events, output, the logic types the runtime
// provides, and the small helpers its states share. Pure: no I/O.
import type { CallbackActorLogic, EventObject, PromiseActorLogic } from "xstate"

export type VoicemailPolicy = "hang_up" | "leave_opening_line"
export type ProposalAction = "concession" | "callback" | "escalate"

export interface CallInput {
  callId: number
  runId: number
  tenantId: number
  targetId: number
  phone: string
  attempt: number
  /** seconds the reservation covers */
  expectedSeconds: number
  /** hard cap on connected time, from answer */
  maxCallMs: number
  /** from the start of dialing (connecting + ringing) to giving up */
  ringTimeoutMs: number
  /** how long the call waits for a human decision before the agent moves on */
  approvalHoldMs: number
  voicemail: VoicemailPolicy
}

export interface Proposal {
  action: ProposalAction
  valueMinor: number | null
  rationale: string
}

/**
 * Outcomes the machine itself produces. CONVERSATION_ENDED may bring any other string
 * (e.g. "interested", "declined"); the type stays `string` for that reason.
 */
export type KnownCallOutcome =
  | "insufficient_funds"
  | "busy"
  | "no_answer"
  | "failed"
  | "voicemail"
  | "voicemail_left"
  | "max_duration"
  | "callee_hung_up"
  | "agent_error"
  | "interrupted"
  | "handed_off"
  | "handoff_failed"

/**
 * Outcomes another attempt may change: the line was busy, nobody answered, the carrier failed.
 * The one list: the call's output uses it; the dialer's retry policy (src/dialing/dialer.policy.ts)
 * spells it again, held to it by its type.
 */
export const RETRYABLE_OUTCOMES = ["busy", "no_answer", "failed"] as const
export type RetryableOutcome = (typeof RETRYABLE_OUTCOMES)[number]
export const isRetryableOutcome = (o: string): o is RetryableOutcome =>
  (RETRYABLE_OUTCOMES as readonly string[]).includes(o)

/** Settlement is retried this many times after the first attempt fails. */
export const SETTLE_RETRIES = 5

export interface CallContext extends CallInput {
  /** epoch ms a human answered (from ANSWERED.at); null if never */
  answeredAt: number | null
  /** epoch ms the line ended (from the ending event, answeredAt + maxCallMs on max duration, else hangUp's `at`) */
  endedAt: number | null
  outcome: string | null
  /** billed seconds: ceil((endedAt - answeredAt) / 1000) when a human answered, else 0; set on entering settling */
  connectedSeconds: number
  turns: number
  pendingProposal: Proposal | null
  approvalId: number | null
  /** reserveFunds succeeded */
  funded: boolean
  /** settle succeeded, or there was nothing to settle (no reservation was made) */
  settled: boolean
  settleFailures: number
  /** FAILED.reason, or the message of an actor error that ended the call */
  failureReason: string | null
  /** The operator a HANDOFF asked for (patch-in), and the conference the callee was moved into */
  operatorNumber: string | null
  conferenceId: string | null
}

/** Events the runtime's `placeCall` actor sends while dialing. */
export type TelephonyEvent =
  | { type: "RINGING" }
  | { type: "ANSWERED"; by: "human" | "machine"; at: number }
  | { type: "BUSY" }
  | { type: "NO_ANSWER" }
  | { type: "FAILED"; reason: string }

/** Events the runtime's `converse` actor sends while connected. */
export type ConversationEvent =
  | { type: "TURN"; speaker: "agent" | "callee"; text: string; at: number }
  | { type: "PROPOSE"; action: ProposalAction; valueMinor: number | null; rationale: string }
  | { type: "CONVERSATION_ENDED"; outcome: string; at: number }
  | { type: "CALLEE_HUNG_UP"; at: number }

/** Events the runtime sends to a call actor from outside. */
export type CallControlEvent =
  | { type: "APPROVAL_CREATED"; approvalId: number }
  /** `valueMinor`: an approved concession's amount, when the approver set it (else the proposal's stands). */
  | { type: "APPROVAL_DECIDED"; approvalId: number; decision: "approved" | "denied"; valueMinor?: number | null }
  /** Patch-in: move the callee into a recorded conference with the operator; the agent drops. */
  | { type: "HANDOFF"; operatorNumber: string }

export type CallEvent = TelephonyEvent | ConversationEvent | CallControlEvent

/** Events the machine sends to the `converse` actor. */
export type ConverseInboundEvent =
  | {
      type: "APPROVAL_DECIDED"
      approvalId: number
      decision: "approved" | "denied"
      /** An approved concession's amount, when the approver set it. */
      valueMinor?: number
      proposal: Proposal | null
    }
  | { type: "APPROVAL_TIMEOUT"; approvalId: number | null; proposal: Proposal | null }

export interface ReserveFundsInput {
  callId: number
  tenantId: number
  expectedSeconds: number
}
export interface LineInput {
  callId: number
  runId: number
  tenantId: number
  targetId: number
  phone: string
  attempt: number
}
export type PlaceCallInput = LineInput
export type ConverseInput = LineInput
export type LeaveMessageInput = LineInput
export interface HangUpInput {
  callId: number
  tenantId: number
}
/** `at`: epoch ms the line was released; used as endedAt when no event stamped the end. */
export interface HangUpOutput {
  at: number
}
export interface HandOffInput {
  callId: number
  tenantId: number
  operatorNumber: string
}
/** `at`: epoch ms the agent's leg left the call (the end of the billed time). */
export interface HandOffOutput {
  conferenceId: string
  at: number
}
export interface SettleInput {
  callId: number
  tenantId: number
  connectedSeconds: number
  outcome: string | null
}

/** Which call an effect is about. */
export interface CallRef {
  callId: number
  runId: number
  tenantId: number
  targetId: number
}
/** Params of `requestApproval`. */
export interface ApprovalRequest extends CallRef {
  phone: string
  proposal: Proposal
}

export interface CallOutput {
  callId: number
  outcome: string | null
  connectedSeconds: number
  answered: boolean
  retryable: boolean
  funded: boolean
  settled: boolean
  turns: number
}

/**
 * The logic types the runtime must provide (`machine.provide({ actors })` checks them exactly, so
 * write e.g. `fromPromise<void, ReserveFundsInput>(...)` or annotate with these aliases).
 */
export type ReserveFundsLogic = PromiseActorLogic<void, ReserveFundsInput>
export type PlaceCallLogic = CallbackActorLogic<EventObject, PlaceCallInput>
export type LeaveMessageLogic = PromiseActorLogic<void, LeaveMessageInput>
export type ConverseLogic = CallbackActorLogic<ConverseInboundEvent, ConverseInput>
export type HangUpLogic = PromiseActorLogic<HangUpOutput, HangUpInput>
export type SettleLogic = PromiseActorLogic<void, SettleInput>
export type HandOffLogic = PromiseActorLogic<HandOffOutput, HandOffInput>

export const notProvided = (name: string) => new Error(`call machine: actor "${name}" not provided`)

export const callRef = ({ context }: { context: CallContext }): CallRef => ({
  callId: context.callId,
  runId: context.runId,
  tenantId: context.tenantId,
  targetId: context.targetId,
})

export const lineInput = ({ context }: { context: CallContext }): LineInput => ({
  callId: context.callId,
  runId: context.runId,
  tenantId: context.tenantId,
  targetId: context.targetId,
  phone: context.phone,
  attempt: context.attempt,
})

export const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error))
