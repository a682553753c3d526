// One dial attempt of one target: reserve funds, dial, talk (with approvals), hang up, settle.
// Pure: telephony, the conversation, money and approvals are actors/actions the runtime provides.
// Its types and shared helpers are in call.parts.ts. A call is not persisted: a process that takes
// a run over finalises the calls the old owner left in flight from Postgres.
import { assertEvent, assign, type EventObject, fromCallback, fromPromise, sendTo, setup } from "xstate"
import {
  type ApprovalRequest,
  type CallContext,
  type CallEvent,
  type CallInput,
  type CallOutput,
  type ConverseInboundEvent,
  type ConverseInput,
  callRef,
  errorMessage,
  type HandOffInput,
  type HandOffOutput,
  type HangUpInput,
  type HangUpOutput,
  isRetryableOutcome,
  type LeaveMessageInput,
  lineInput,
  notProvided,
  type PlaceCallInput,
  type ReserveFundsInput,
  SETTLE_RETRIES,
  type SettleInput,
} from "./call.parts.js"

export * from "./call.parts.js"

const SETTLING = "Debiting the connected time and releasing the rest of the reservation"

export const callMachine = setup({
  types: {} as {
    context: CallContext
    input: CallInput
    events: CallEvent
    output: CallOutput
  },
  actors: {
    /**
     * Reserve the expected cost. Reject only when funds are insufficient; retry transient errors inside. Idempotent
     * by callId.
     */
    reserveFunds: fromPromise<void, ReserveFundsInput>(async () => {
      throw notProvided("reserveFunds")
    }),
    /**
     * Place the call and relay provider events (TelephonyEvent) with sendBack. Lives only while dialing: its cleanup
     * must NOT hang up.
     */
    placeCall: fromCallback<EventObject, PlaceCallInput>(() => {
      throw notProvided("placeCall")
    }),
    /** Play the opening line to an answering machine; resolve when done. */
    leaveMessage: fromPromise<void, LeaveMessageInput>(async () => {
      throw notProvided("leaveMessage")
    }),
    /**
     * Run the conversation: sendBack ConversationEvent, receive ConverseInboundEvent. Cleanup stops the agent, not
     * the line.
     */
    converse: fromCallback<ConverseInboundEvent, ConverseInput>(() => {
      throw notProvided("converse")
    }),
    /** Put the callee in a recorded conference, dial the operator, drop our leg; resolve once set up. */
    handOff: fromPromise<HandOffOutput, HandOffInput>(async () => {
      throw notProvided("handOff")
    }),
    /** Release the line (idempotent; a line already gone is success). Resolve with the release time. */
    hangUp: fromPromise<HangUpOutput, HangUpInput>(async () => {
      throw notProvided("hangUp")
    }),
    /**
     * Debit connectedSeconds and release the rest of the reservation. Idempotent by callId; a missing reservation is
     * a no-op.
     */
    settle: fromPromise<void, SettleInput>(async () => {
      throw notProvided("settle")
    }),
  },
  actions: {
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
    operatorNumber: null,
    conferenceId: null,
  }),
  initial: "reserving",
  states: {
    reserving: {
      description: "Reserving the expected cost of the call before dialing.",
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
    },
    dialing: {
      description:
        "The provider is placing the call. The ring timeout runs from the start of dialing, so a call stuck " +
        "connecting ends too.",
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
      },
    },
    voicemail: {
      description: "An answering machine picked up: leave the opening line or hang up, per the workflow's policy.",
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
    },
    connected: {
      description:
        "A human answered; the agent converses. Capped at maxCallMs from answer; proposals wait for a human " +
        "decision for at most approvalHoldMs.",
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
                sendTo(
                  "converse",
                  ({ context }): ConverseInboundEvent => ({
                    type: "APPROVAL_TIMEOUT",
                    approvalId: context.approvalId,
                    proposal: context.pendingProposal,
                  }),
                ),
                assign({ pendingProposal: null, approvalId: null }),
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
                    ...(typeof event.valueMinor === "number" && { valueMinor: event.valueMinor }),
                    proposal: context.pendingProposal,
                  }
                }),
                assign({ pendingProposal: null, approvalId: null }),
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
        // Talking or holding for an approval: leaving `connected` stops the agent (and a pending approval's hold).
        HANDOFF: {
          target: "handingOff",
          actions: assign({
            operatorNumber: ({ event }) => {
              assertEvent(event, "HANDOFF")
              return event.operatorNumber
            },
          }),
        },
      },
    },
    handingOff: {
      description: "Patch-in: the callee joins a recorded conference with the operator; the agent's leg drops.",
      invoke: {
        id: "handOff",
        src: "handOff",
        input: ({ context }) => ({
          callId: context.callId,
          tenantId: context.tenantId,
          operatorNumber: context.operatorNumber ?? "",
        }),
        onDone: {
          target: "settling",
          actions: assign(({ event }) => ({
            outcome: "handed_off",
            conferenceId: event.output.conferenceId,
            endedAt: event.output.at,
          })),
        },
        onError: {
          target: "hangingUp",
          actions: assign({ outcome: "handoff_failed", failureReason: ({ event }) => errorMessage(event.error) }),
        },
      },
    },
    hangingUp: {
      description: "Releasing the line. A failure here never blocks settlement.",
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
      description: `${SETTLING}; retried ${SETTLE_RETRIES} times.`,
      entry: [
        assign({
          connectedSeconds: ({ context }) =>
            context.answeredAt !== null && context.endedAt !== null
              ? Math.max(0, Math.ceil((context.endedAt - context.answeredAt) / 1000))
              : 0,
        }),
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
                actions: assign({ settleFailures: ({ context }) => context.settleFailures + 1 }),
              },
              {
                target: "#call.done",
                actions: assign({ settleFailures: ({ context }) => context.settleFailures + 1, settled: false }),
              },
            ],
          },
        },
        backoff: {
          description: "Waiting settleRetry before the next attempt.",
          after: { settleRetry: "attempt" },
        },
      },
    },
    done: {
      description: "The attempt is over and accounted for (or settlement gave up: settled false).",
      type: "final",
    },
  },
  output: ({ context }) => ({
    callId: context.callId,
    outcome: context.outcome,
    connectedSeconds: context.connectedSeconds,
    answered: context.answeredAt !== null,
    retryable: context.outcome !== null && isRetryableOutcome(context.outcome),
    funded: context.funded,
    settled: context.settled,
    turns: context.turns,
  }),
})

export type CallMachine = typeof callMachine
