// The lifecycle of a simulation campaign: which command (run a batch, answer, resume, stop) its state
// accepts, and what the facts read from Postgres (a question, a finished batch, the end) move it to.
// Pure: src/rehearsals/campaigns.service.ts feeds it events (through runtime/actors/sim-campaign.ts, its
// CampaignMachine port) and performs the actions it emits.
import { assign, type SnapshotFrom, setup } from "xstate"

export const SIM_CAMPAIGN_STATES = ["ready", "running", "awaiting_answer", "completed", "stopped", "failed"] as const
export type SimCampaignState = (typeof SIM_CAMPAIGN_STATES)[number]

export interface SimCampaignInput {
  campaignId: number
  /** simulated callees in all */
  size: number
  /** callees one RUN_BATCH releases */
  batchSize: number
  /** callees released to the dialer so far */
  released: number
}

export type SimCampaignContext = SimCampaignInput

export type SimCampaignEvent =
  // Commands (an api request): refused ones answer 409 SIM_CAMPAIGN_STATE.
  | { type: "RUN_BATCH" }
  /**
   * The service decides the question (through the approvals service) once `can` accepts this, then
   * sends it: the held conversation resumes.
   */
  | { type: "ANSWER"; questionId: number }
  /** `inFlight`: conversations of the last batch have not all ended yet (the campaign resumes running). */
  | { type: "RESUME"; inFlight: boolean }
  | { type: "STOP" }
  // Facts the service reads from Postgres on every read and command.
  /** A conversation of the campaign is held on a pending approval. */
  | { type: "QUESTION_ASKED"; questionId: number }
  /** No conversation is held on a question any more (answered here, on /api/approvals, or expired). */
  | { type: "QUESTION_ANSWERED" }
  /** Every released callee has a final outcome, and some are still held back. */
  | { type: "BATCH_DONE" }
  /** Every one of the `size` callees has a final outcome. */
  | { type: "ALL_DONE" }
  /** The campaign's run ended without finishing its callees. */
  | { type: "FAILED"; reason: string }

/** Params of `releaseBatch`: hand the next `count` held callees to the dialer and wake the run. */
export interface BatchRelease {
  campaignId: number
  count: number
}

/** Params of `stopDialing`. */
export interface CampaignRef {
  campaignId: number
}

const ref = ({ context }: { context: SimCampaignContext }): CampaignRef => ({ campaignId: context.campaignId })

const nextBatch = (c: SimCampaignContext): number => Math.max(0, Math.min(c.batchSize, c.size - c.released))

export const simCampaignMachine = setup({
  types: {} as {
    context: SimCampaignContext
    input: SimCampaignInput
    events: SimCampaignEvent
  },
  actions: {
    /** Service: release the next batch of held callees (in id order) and wake the run's owner. */
    releaseBatch: (_, _params: BatchRelease) => {},
    /** Service: hold back the released callees not dialed yet and pause the run; conversations in flight end. */
    stopDialing: (_, _params: CampaignRef) => {},
    countRelease: assign({ released: ({ context }) => context.released + nextBatch(context) }),
  },
  guards: {
    hasMore: ({ context }) => nextBatch(context) > 0,
    inFlight: ({ event }) => event.type === "RESUME" && event.inFlight,
  },
}).createMachine({
  id: "simCampaign",
  description:
    "A rehearsal of a workflow against simulated callees, one batch at a time. ready → (run-batch) running → " +
    "(a question) awaiting_answer → (answer) running → (batch done) ready … → (all done) completed; stop from " +
    "any active state → stopped → (resume) ready, or running while conversations are still in flight; failed " +
    "when the run ends without finishing.",
  context: ({ input }) => ({ ...input }),
  initial: "ready",
  states: {
    ready: {
      description: "No batch in flight; run-batch releases the next batch_size callees.",
      on: {
        RUN_BATCH: {
          guard: "hasMore",
          target: "running",
          actions: [
            { type: "releaseBatch", params: ({ context }) => ({ ...ref({ context }), count: nextBatch(context) }) },
            "countRelease",
          ],
        },
        STOP: { target: "stopped", actions: [{ type: "stopDialing", params: ref }] },
        ALL_DONE: { target: "completed" },
        FAILED: { target: "failed" },
      },
    },
    running: {
      description: "A batch of simulated conversations is in flight on the runtime.",
      on: {
        QUESTION_ASKED: { target: "awaiting_answer" },
        BATCH_DONE: { target: "ready" },
        ALL_DONE: { target: "completed" },
        STOP: { target: "stopped", actions: [{ type: "stopDialing", params: ref }] },
        FAILED: { target: "failed" },
      },
    },
    awaiting_answer: {
      description:
        "A simulated callee's conversation is held on a concession, callback or escalation until it is answered.",
      on: {
        ANSWER: { target: "running" },
        QUESTION_ANSWERED: { target: "running" },
        ALL_DONE: { target: "completed" },
        STOP: { target: "stopped", actions: [{ type: "stopDialing", params: ref }] },
        FAILED: { target: "failed" },
      },
    },
    stopped: {
      description:
        "Nothing more is released; conversations in flight finish (a held one may still be answered). " +
        "STOP again is a no-op.",
      on: {
        RESUME: [{ guard: "inFlight", target: "running" }, { target: "ready" }],
        // Targeted (not `{}`), so `can` accepts them: xstate treats an empty transition as refused.
        STOP: { target: "stopped" },
        ANSWER: { target: "stopped" },
        ALL_DONE: { target: "completed" },
        FAILED: { target: "failed" },
      },
    },
    completed: {
      description: "Every simulated callee has a final outcome.",
      type: "final",
    },
    failed: {
      description: "The campaign's run ended (failed or cancelled) before every callee had an outcome.",
      type: "final",
    },
  },
})

export type SimCampaignMachine = typeof simCampaignMachine
export type SimCampaignSnapshot = SnapshotFrom<typeof simCampaignMachine>

/** The snapshot of a stored campaign (only its state and counters are stored; the machine has no timers). */
export function simCampaignSnapshot(state: SimCampaignState, context: SimCampaignContext): SimCampaignSnapshot {
  return simCampaignMachine.resolveState({ value: state, context })
}

export function simCampaignState(snapshot: SimCampaignSnapshot): SimCampaignState {
  return snapshot.value as SimCampaignState
}
