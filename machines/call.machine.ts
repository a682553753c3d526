// One dial attempt of one target: reserve funds, dial, talk (with approvals), hang up, settle.
// Pure: telephony, the conversation, money and persistence are actors/actions the runtime provides.
import {
  assertEvent,
  assign,
  fromCallback,
  fromPromise,
  sendTo,
  setup,
  type CallbackActorLogic,
  type EventObject,
  type PromiseActorLogic,
  type SnapshotFrom,
} from "xstate"

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

/** Outcomes after which the dialer may try the target again. */
export const RETRYABLE_OUTCOMES: readonly string[] = ["busy", "no_answer", "failed"]

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
  | { type: "APPROVAL_DECIDED"; approvalId: number; decision: "approved" | "denied" }
  /** Finalise an orphaned call (after a takeover): hang up what may be live, then settle. `at` = now, epoch ms. */
  | { type: "ABANDON"; at: number; reason?: string }
  /** Send right after restoring an actor: re-arms what a restore does not (a settle retry waiting on its backoff). */
  | { type: "REARM"; now: number }

export type CallEvent = TelephonyEvent | ConversationEvent | CallControlEvent

/** Events the machine sends to the `converse` actor. */
export type ConverseInboundEvent =
  | { type: "APPROVAL_DECIDED"; approvalId: number; decision: "approved" | "denied"; proposal: Proposal | null }
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
export interface SettleInput {
  callId: number
  tenantId: number
  connectedSeconds: number
  outcome: string | null
}

/** Params of `persist`. */
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

const notProvided = (name: string) => new Error(`call machine: actor "${name}" not provided`)

const callRef = ({ context }: { context: CallContext }): CallRef => ({
  callId: context.callId,
  runId: context.runId,
  tenantId: context.tenantId,
  targetId: context.targetId,
})

const lineInput = ({ context }: { context: CallContext }): LineInput => ({
  callId: context.callId,
  runId: context.runId,
  tenantId: context.tenantId,
  targetId: context.targetId,
  phone: context.phone,
  attempt: context.attempt,
})

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const persist = { type: "persist", params: callRef } as const

export const callMachine = setup({
  types: {} as {
    context: CallContext
    input: CallInput
    events: CallEvent
    output: CallOutput
  },
  actors: {
    /** Reserve the expected cost. Reject only when funds are insufficient; retry transient errors inside. Idempotent by callId. */
    reserveFunds: fromPromise<void, ReserveFundsInput>(async () => {
      throw notProvided("reserveFunds")
    }),
    /** Place the call and relay provider events (TelephonyEvent) with sendBack. Lives only while dialing: its cleanup must NOT hang up. */
    placeCall: fromCallback<EventObject, PlaceCallInput>(() => {
      throw notProvided("placeCall")
    }),
    /** Play the opening line to an answering machine; resolve when done. */
    leaveMessage: fromPromise<void, LeaveMessageInput>(async () => {
      throw notProvided("leaveMessage")
    }),
    /** Run the conversation: sendBack ConversationEvent, receive ConverseInboundEvent. Cleanup stops the agent, not the line. */
    converse: fromCallback<ConverseInboundEvent, ConverseInput>(() => {
      throw notProvided("converse")
    }),
    /** Release the line (idempotent; a line already gone is success). Resolve with the release time. */
    hangUp: fromPromise<HangUpOutput, HangUpInput>(async () => {
      throw notProvided("hangUp")
    }),
    /** Debit connectedSeconds and release the rest of the reservation. Idempotent by callId; a missing reservation is a no-op. */
    settle: fromPromise<void, SettleInput>(async () => {
      throw notProvided("settle")
    }),
  },
  actions: {
    /** Runtime: write `self.getPersistedSnapshot()` once the current macrostep is over. */
    persist: (_, _params: CallRef) => {},
    /** Runtime: create the approval (approval actor + row), then send APPROVAL_CREATED { approvalId } to this actor. */
    requestApproval: (_, _params: ApprovalRequest) => {},
  },
  delays: {
    ringTimeout: ({ context }) => context.ringTimeoutMs,
    maxCall: ({ context }) => context.maxCallMs,
    approvalHold: ({ context }) => context.approvalHoldMs,
    /** 1 s, 2 s, 4 s, 8 s, 16 s; override with machine.provide({ delays }) */
    settleRetry: ({ context }) => Math.min(60_000, 1_000 * 2 ** Math.max(0, context.settleFailures - 1)),
  },
  guards: {
    leavesMessage: ({ context }) => context.voicemail === "leave_opening_line",
    answeredByHuman: ({ event }) => event.type === "ANSWERED" && event.by === "human",
    matchesApproval: ({ context, event }) =>
      event.type === "APPROVAL_DECIDED" && context.approvalId !== null && event.approvalId === context.approvalId,
    settleRetriesLeft: ({ context }) => context.settleFailures < SETTLE_RETRIES,
  },
}).createMachine({
  id: "call",
  description: "One dial attempt of one target, from fund reservation to settlement.",
  context: ({ input }) => ({
    ...input,
    answeredAt: null,
    endedAt: null,
    outcome: null,
    connectedSeconds: 0,
    turns: 0,
    pendingProposal: null,
    approvalId: null,
    funded: false,
    settled: false,
    settleFailures: 0,
    failureReason: null,
  }),
  initial: "reserving",
  states: {
    reserving: {
      description: "Reserving the expected cost of the call before dialing.",
      entry: [persist],
      invoke: {
        id: "reserveFunds",
        src: "reserveFunds",
        input: ({ context }) => ({
          callId: context.callId,
          tenantId: context.tenantId,
          expectedSeconds: context.expectedSeconds,
        }),
        onDone: { target: "dialing", actions: assign({ funded: true }) },
        // Nothing was reserved and no call placed: nothing to settle.
        onError: {
          target: "done",
          actions: assign({
            outcome: "insufficient_funds",
            settled: true,
            failureReason: ({ event }) => errorMessage(event.error),
          }),
        },
      },
      on: {
        // A reservation may or may not exist: settle (0 s) releases it if it does.
        ABANDON: { target: "settling", actions: assign({ outcome: "interrupted" }) },
      },
    },
    dialing: {
      description:
        "The provider is placing the call. The ring timeout runs from the start of dialing, so a call stuck connecting ends too.",
      entry: [persist],
      invoke: {
        id: "placeCall",
        src: "placeCall",
        input: lineInput,
        onError: {
          target: "hangingUp",
          actions: assign({ outcome: "failed", failureReason: ({ event }) => errorMessage(event.error) }),
        },
      },
      after: {
        ringTimeout: { target: "hangingUp", actions: assign({ outcome: "no_answer" }) },
      },
      initial: "connecting",
      states: {
        connecting: {
          description: "Waiting for the far end to ring.",
          on: { RINGING: "ringing" },
        },
        ringing: {
          description: "The callee's phone is ringing.",
        },
      },
      on: {
        ANSWERED: [
          {
            guard: "answeredByHuman",
            target: "connected",
            actions: assign({
              answeredAt: ({ event }) => {
                assertEvent(event, "ANSWERED")
                return event.at
              },
            }),
          },
          { target: "voicemail" },
        ],
        BUSY: { target: "settling", actions: assign({ outcome: "busy" }) },
        NO_ANSWER: { target: "settling", actions: assign({ outcome: "no_answer" }) },
        FAILED: {
          target: "settling",
          actions: assign({
            outcome: "failed",
            failureReason: ({ event }) => {
              assertEvent(event, "FAILED")
              return event.reason
            },
          }),
        },
        ABANDON: {
          target: "hangingUp",
          actions: assign({
            outcome: "interrupted",
            failureReason: ({ event }) => {
              assertEvent(event, "ABANDON")
              return event.reason ?? null
            },
          }),
        },
      },
    },
    voicemail: {
      description: "An answering machine picked up: leave the opening line or hang up, per the workflow's policy.",
      entry: [persist],
      initial: "choosing",
      states: {
        choosing: {
          description: "Routes on context.voicemail.",
          always: [
            { guard: "leavesMessage", target: "leavingMessage" },
            { target: "#call.hangingUp", actions: assign({ outcome: "voicemail" }) },
          ],
        },
        leavingMessage: {
          description: "Playing the opening line to the answering machine.",
          invoke: {
            id: "leaveMessage",
            src: "leaveMessage",
            input: lineInput,
            onDone: { target: "#call.hangingUp", actions: assign({ outcome: "voicemail_left" }) },
            onError: {
              target: "#call.hangingUp",
              actions: assign({ outcome: "voicemail", failureReason: ({ event }) => errorMessage(event.error) }),
            },
          },
        },
      },
      on: {
        ABANDON: { target: "hangingUp", actions: assign({ outcome: "interrupted" }) },
      },
    },
    connected: {
      description:
        "A human answered; the agent converses. Capped at maxCallMs from answer; proposals wait for a human decision for at most approvalHoldMs.",
      entry: [persist],
      invoke: {
        id: "converse",
        src: "converse",
        input: lineInput,
        onError: {
          target: "hangingUp",
          actions: assign({ outcome: "agent_error", failureReason: ({ event }) => errorMessage(event.error) }),
        },
      },
      after: {
        maxCall: {
          target: "hangingUp",
          // The timer started on answer, so the end is exact without reading a clock.
          actions: assign({
            outcome: "max_duration",
            endedAt: ({ context }) => (context.answeredAt === null ? null : context.answeredAt + context.maxCallMs),
          }),
        },
      },
      initial: "talking",
      states: {
        talking: {
          description: "Conversation in progress.",
          on: {
            PROPOSE: {
              target: "awaitingApproval",
              actions: [
                assign({
                  pendingProposal: ({ event }) => {
                    assertEvent(event, "PROPOSE")
                    return { action: event.action, valueMinor: event.valueMinor, rationale: event.rationale }
                  },
                  approvalId: null,
                }),
                {
                  type: "requestApproval",
                  params: ({ context, event }) => {
                    assertEvent(event, "PROPOSE")
                    return {
                      ...callRef({ context }),
                      phone: context.phone,
                      proposal: { action: event.action, valueMinor: event.valueMinor, rationale: event.rationale },
                    }
                  },
                },
                persist,
              ],
            },
          },
        },
        awaitingApproval: {
          description:
            "The agent proposed something material; the callee is held while a human decides (at most approvalHoldMs).",
          after: {
            approvalHold: {
              target: "talking",
              actions: [
                sendTo("converse", ({ context }): ConverseInboundEvent => ({
                  type: "APPROVAL_TIMEOUT",
                  approvalId: context.approvalId,
                  proposal: context.pendingProposal,
                })),
                assign({ pendingProposal: null, approvalId: null }),
                persist,
              ],
            },
          },
          on: {
            APPROVAL_CREATED: {
              actions: [
                assign({
                  approvalId: ({ event }) => {
                    assertEvent(event, "APPROVAL_CREATED")
                    return event.approvalId
                  },
                }),
                persist,
              ],
            },
            APPROVAL_DECIDED: {
              guard: "matchesApproval",
              target: "talking",
              actions: [
                sendTo("converse", ({ context, event }): ConverseInboundEvent => {
                  assertEvent(event, "APPROVAL_DECIDED")
                  return {
                    type: "APPROVAL_DECIDED",
                    approvalId: event.approvalId,
                    decision: event.decision,
                    proposal: context.pendingProposal,
                  }
                }),
                assign({ pendingProposal: null, approvalId: null }),
                persist,
              ],
            },
          },
        },
      },
      on: {
        TURN: { actions: assign({ turns: ({ context }) => context.turns + 1 }) },
        CONVERSATION_ENDED: {
          target: "hangingUp",
          actions: assign(({ event }) => {
            assertEvent(event, "CONVERSATION_ENDED")
            return { outcome: event.outcome, endedAt: event.at }
          }),
        },
        CALLEE_HUNG_UP: {
          target: "hangingUp",
          actions: assign(({ event }) => {
            assertEvent(event, "CALLEE_HUNG_UP")
            return { outcome: "callee_hung_up", endedAt: event.at }
          }),
        },
        ABANDON: {
          target: "hangingUp",
          actions: assign(({ event }) => {
            assertEvent(event, "ABANDON")
            return { outcome: "interrupted", endedAt: event.at, failureReason: event.reason ?? null }
          }),
        },
      },
    },
    hangingUp: {
      description: "Releasing the line. A failure here never blocks settlement.",
      entry: [persist],
      invoke: {
        id: "hangUp",
        src: "hangUp",
        input: ({ context }) => ({ callId: context.callId, tenantId: context.tenantId }),
        onDone: {
          target: "settling",
          actions: assign({ endedAt: ({ context, event }) => context.endedAt ?? event.output.at }),
        },
        onError: { target: "settling" },
      },
    },
    settling: {
      description: `Debiting the connected time and releasing the rest of the reservation; retried ${SETTLE_RETRIES} times.`,
      entry: [
        assign({
          connectedSeconds: ({ context }) =>
            context.answeredAt !== null && context.endedAt !== null
              ? Math.max(0, Math.ceil((context.endedAt - context.answeredAt) / 1000))
              : 0,
        }),
        persist,
      ],
      initial: "attempt",
      states: {
        attempt: {
          description: "One settle call in flight.",
          invoke: {
            id: "settle",
            src: "settle",
            input: ({ context }) => ({
              callId: context.callId,
              tenantId: context.tenantId,
              connectedSeconds: context.connectedSeconds,
              outcome: context.outcome,
            }),
            onDone: { target: "#call.done", actions: assign({ settled: true }) },
            onError: [
              {
                guard: "settleRetriesLeft",
                target: "backoff",
                actions: [assign({ settleFailures: ({ context }) => context.settleFailures + 1 }), persist],
              },
              {
                target: "#call.done",
                actions: assign({ settleFailures: ({ context }) => context.settleFailures + 1, settled: false }),
              },
            ],
          },
        },
        backoff: {
          description: "Waiting settleRetry before the next attempt (REARM retries at once after a restore).",
          after: { settleRetry: "attempt" },
          on: { REARM: "attempt" },
        },
      },
    },
    done: {
      description: "The attempt is over and accounted for (or settlement gave up: settled false).",
      type: "final",
      entry: [persist],
    },
  },
  output: ({ context }) => ({
    callId: context.callId,
    outcome: context.outcome,
    connectedSeconds: context.connectedSeconds,
    answered: context.answeredAt !== null,
    retryable: context.outcome !== null && RETRYABLE_OUTCOMES.includes(context.outcome),
    funded: context.funded,
    settled: context.settled,
    turns: context.turns,
  }),
})

export type CallMachine = typeof callMachine
export type CallSnapshot = SnapshotFrom<typeof callMachine>
