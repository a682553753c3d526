// The lifecycle of one campaign run: whether the dialer may start calls, and when the run is over.
// Pure: the dialer, persistence and status notifications are actions the runtime provides.
import { assertEvent, assign, type SnapshotFrom, setup } from "xstate"

export interface RunInput {
  runId: number
  tenantId: number
  workflowId: number
}

export type PauseReason = "user" | "insufficient_funds"

export interface RunContext extends RunInput {
  /** calls in flight (CALL_STARTED minus CALL_ENDED) */
  active: number
  /** dial attempts started (a retried target counts once per attempt) */
  dialed: number
  /** attempts a human answered */
  connected: number
  /** targets with a final outcome (CALL_ENDED with final: true) */
  finished: number
  /** the dialer found no target left to dial or retry */
  queueEmpty: boolean
  pauseReason: PauseReason | null
  endReason: string | null
}

export type RunEvent =
  | { type: "CALL_STARTED" }
  | { type: "CALL_CONNECTED" }
  | { type: "CALL_ENDED"; final: boolean }
  | { type: "QUEUE_EMPTY" }
  | { type: "TARGETS_ADDED" }
  | { type: "PAUSE"; reason: PauseReason }
  | { type: "RESUME" }
  | { type: "CANCEL"; reason?: string }
  | { type: "FAIL"; reason: string }

/** The run status the outside world sees (spec: run.status). */
export type RunStatus = "running" | "paused" | "completed" | "cancelled" | "failed"

export interface RunOutput {
  runId: number
  status: "completed" | "cancelled" | "failed"
  endReason: string | null
  dialed: number
  connected: number
  finished: number
}

/** Params of `persist`, `startDialing` and `stopDialing`. */
export interface RunRef {
  runId: number
  tenantId: number
  workflowId: number
}

/** Params of `statusChanged`. `reason` is the pause reason for paused, the end reason for final statuses. */
export interface RunStatusChange extends RunRef {
  status: RunStatus
  reason: string | null
}

const ref = ({ context }: { context: RunContext }): RunRef => ({
  runId: context.runId,
  tenantId: context.tenantId,
  workflowId: context.workflowId,
})

const statusParams =
  (status: RunStatus) =>
  ({ context }: { context: RunContext }): RunStatusChange => ({
    ...ref({ context }),
    status,
    reason: status === "paused" ? context.pauseReason : status === "running" ? null : context.endReason,
  })

export const runMachine = setup({
  types: {} as {
    context: RunContext
    input: RunInput
    events: RunEvent
    output: RunOutput
  },
  actions: {
    /**
     * Runtime: write `self.getPersistedSnapshot()` once the current macrostep is over (the actor's snapshot is
     * updated after actions run).
     */
    persist: (_, _params: RunRef) => {},
    /**
     * Runtime: tell the world (bus, runs table, webhooks). May repeat a status after a restore; treat as idempotent.
     */
    statusChanged: (_, _params: RunStatusChange) => {},
    /** Runtime: start the dialer loop for this run (entry of `running`). */
    startDialing: (_, _params: RunRef) => {},
    /** Runtime: stop the dialer loop; calls in flight go on (exit of `running`). */
    stopDialing: (_, _params: RunRef) => {},
    callStarted: assign({
      active: ({ context }) => context.active + 1,
      dialed: ({ context }) => context.dialed + 1,
    }),
    callConnected: assign({ connected: ({ context }) => context.connected + 1 }),
    callEnded: assign(({ context, event }) => {
      assertEvent(event, "CALL_ENDED")
      return {
        active: Math.max(0, context.active - 1),
        finished: context.finished + (event.final ? 1 : 0),
      }
    }),
    markQueueEmpty: assign({ queueEmpty: true }),
    markTargetsAdded: assign({ queueEmpty: false }),
    setPauseReason: assign({
      pauseReason: ({ event }) => {
        assertEvent(event, "PAUSE")
        return event.reason
      },
    }),
    clearPause: assign({ pauseReason: null, queueEmpty: false }),
    setCancelReason: assign({
      endReason: ({ event }) => {
        assertEvent(event, "CANCEL")
        return event.reason ?? "user"
      },
    }),
    setFailReason: assign({
      endReason: ({ event }) => {
        assertEvent(event, "FAIL")
        return event.reason
      },
    }),
    setCompleted: assign({ endReason: "all_targets_final" }),
  },
  guards: {
    drained: ({ context }) => context.queueEmpty && context.active === 0,
    idle: ({ context }) => context.active === 0,
  },
}).createMachine({
  id: "run",
  description:
    "One run of a campaign. Outside status: running while running, pausing or cancelling (calls are still in " +
    "flight); paused, completed, cancelled, failed as named.",
  context: ({ input }) => ({
    runId: input.runId,
    tenantId: input.tenantId,
    workflowId: input.workflowId,
    active: 0,
    dialed: 0,
    connected: 0,
    finished: 0,
    queueEmpty: false,
    pauseReason: null,
    endReason: null,
  }),
  // Root entry runs once, when the run is created (never on restore).
  entry: [{ type: "statusChanged", params: statusParams("running") }],
  initial: "running",
  states: {
    running: {
      description: "The dialer may start calls. Completes once the queue is empty and no call is in flight.",
      entry: [
        { type: "persist", params: ref },
        { type: "startDialing", params: ref },
      ],
      exit: [{ type: "stopDialing", params: ref }],
      always: { guard: "drained", target: "completed", actions: "setCompleted" },
      on: {
        CALL_STARTED: { actions: ["callStarted", { type: "persist", params: ref }] },
        CALL_CONNECTED: { actions: ["callConnected", { type: "persist", params: ref }] },
        CALL_ENDED: { actions: ["callEnded", { type: "persist", params: ref }] },
        QUEUE_EMPTY: { actions: ["markQueueEmpty", { type: "persist", params: ref }] },
        TARGETS_ADDED: { actions: ["markTargetsAdded", { type: "persist", params: ref }] },
        PAUSE: { target: "pausing", actions: "setPauseReason" },
        CANCEL: { target: "cancelling", actions: "setCancelReason" },
        FAIL: { target: "failed", actions: "setFailReason" },
      },
    },
    pausing: {
      description: "No new calls; calls in flight finish. Reported as running until the last call ends, then paused.",
      entry: [{ type: "persist", params: ref }],
      always: { guard: "idle", target: "paused" },
      on: {
        CALL_STARTED: { actions: ["callStarted", { type: "persist", params: ref }] },
        CALL_CONNECTED: { actions: ["callConnected", { type: "persist", params: ref }] },
        CALL_ENDED: { actions: ["callEnded", { type: "persist", params: ref }] },
        TARGETS_ADDED: { actions: ["markTargetsAdded", { type: "persist", params: ref }] },
        RESUME: { target: "running", actions: "clearPause" },
        CANCEL: { target: "cancelling", actions: "setCancelReason" },
        FAIL: { target: "failed", actions: "setFailReason" },
      },
    },
    paused: {
      description: "No call in flight and none will start until RESUME.",
      entry: [
        { type: "persist", params: ref },
        { type: "statusChanged", params: statusParams("paused") },
      ],
      on: {
        TARGETS_ADDED: { actions: ["markTargetsAdded", { type: "persist", params: ref }] },
        RESUME: {
          target: "running",
          actions: ["clearPause", { type: "statusChanged", params: statusParams("running") }],
        },
        CANCEL: { target: "cancelling", actions: "setCancelReason" },
        FAIL: { target: "failed", actions: "setFailReason" },
      },
    },
    cancelling: {
      description: "Cancelled by a user; calls in flight finish, then cancelled. Reported as running meanwhile.",
      entry: [{ type: "persist", params: ref }],
      always: { guard: "idle", target: "cancelled" },
      on: {
        CALL_STARTED: { actions: ["callStarted", { type: "persist", params: ref }] },
        CALL_CONNECTED: { actions: ["callConnected", { type: "persist", params: ref }] },
        CALL_ENDED: { actions: ["callEnded", { type: "persist", params: ref }] },
        FAIL: { target: "failed", actions: "setFailReason" },
      },
    },
    completed: {
      description: "Every target has a final outcome (the queue is empty and no call is in flight).",
      type: "final",
      entry: [
        { type: "persist", params: ref },
        { type: "statusChanged", params: statusParams("completed") },
      ],
      output: { status: "completed" },
    },
    cancelled: {
      description: "Cancelled and every call in flight has ended.",
      type: "final",
      entry: [
        { type: "persist", params: ref },
        { type: "statusChanged", params: statusParams("cancelled") },
      ],
      output: { status: "cancelled" },
    },
    failed: {
      description: "Stopped by an unrecoverable error (FAIL); calls still in flight finish on their own.",
      type: "final",
      entry: [
        { type: "persist", params: ref },
        { type: "statusChanged", params: statusParams("failed") },
      ],
      output: { status: "failed" },
    },
  },
  // `event` is the done event of the final state reached; its output names the status.
  output: ({ context, event }) => ({
    runId: context.runId,
    status: (event as unknown as { output: { status: RunOutput["status"] } }).output.status,
    endReason: context.endReason,
    dialed: context.dialed,
    connected: context.connected,
    finished: context.finished,
  }),
})

export type RunMachine = typeof runMachine
export type RunSnapshot = SnapshotFrom<typeof runMachine>

/** The outside status of a run snapshot: pausing and cancelling still report running. */
export function runStatus(snapshot: RunSnapshot): RunStatus {
  if (snapshot.matches("paused")) return "paused"
  if (snapshot.matches("completed")) return "completed"
  if (snapshot.matches("cancelled")) return "cancelled"
  if (snapshot.matches("failed")) return "failed"
  return "running"
}
