// One proposal (concession, callback, escalate) awaiting a human decision until it expires.
// Pure: persisting the snapshot and recording an expiry are actions the runtime provides.
import { and, assertEvent, assign, type SnapshotFrom, setup } from "xstate"

export type ApprovalAction = "concession" | "callback" | "escalate"

export interface ApprovalInput {
  approvalId: number
  tenantId: number
  runId: number | null
  callId: number | null
  action: ApprovalAction
  valueMinor: number | null
  /** epoch ms */
  expiresAt: number
  /** epoch ms when the actor is created; on restore, the runtime sends REARM { now } instead (input is ignored then) */
  now: number
}

export interface ApprovalContext extends ApprovalInput {
  decidedBy: number | null
  decidedAt: number | null
  note: string | null
}

export type ApprovalEvent =
  /** `by`: user id; `at`: epoch ms of the decision, stamped by the runtime */
  | { type: "DECIDE"; decision: "approve" | "deny"; by: number; at: number; note?: string }
  /** Send right after restoring: re-arms the expiry timer with what is left of the ttl (expires at once if past). */
  | { type: "REARM"; now: number }

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired"

export interface ApprovalOutput {
  approvalId: number
  status: Exclude<ApprovalStatus, "pending">
  decidedBy: number | null
  decidedAt: number | null
}

/** Params of `persist`. */
export interface ApprovalRef {
  approvalId: number
  tenantId: number
}

/** Params of `decided`: fired on approved, denied and expired (the runtime writes only an expiry). */
export interface ApprovalResolution extends ApprovalRef {
  runId: number | null
  callId: number | null
  status: Exclude<ApprovalStatus, "pending">
  decidedBy: number | null
  decidedAt: number | null
  note: string | null
}

const ref = ({ context }: { context: ApprovalContext }): ApprovalRef => ({
  approvalId: context.approvalId,
  tenantId: context.tenantId,
})

const resolution =
  (status: ApprovalResolution["status"]) =>
  ({ context }: { context: ApprovalContext }): ApprovalResolution => ({
    ...ref({ context }),
    runId: context.runId,
    callId: context.callId,
    status,
    decidedBy: context.decidedBy,
    decidedAt: context.decidedAt,
    note: context.note,
  })

export const approvalMachine = setup({
  types: {} as {
    context: ApprovalContext
    input: ApprovalInput
    events: ApprovalEvent
    output: ApprovalOutput
  },
  actions: {
    /** Runtime: write `self.getPersistedSnapshot()` once the current macrostep is over. */
    persist: (_, _params: ApprovalRef) => {},
    /**
     * Runtime: the approval is resolved. Approvals and denials are decided in Postgres by the api,
     * which also tells the call (the runtime relays APPROVAL_DECIDED), so only an expiry needs a write here.
     */
    decided: (_, _params: ApprovalResolution) => {},
    recordDecision: assign(({ event }) => {
      assertEvent(event, "DECIDE")
      return { decidedBy: event.by, decidedAt: event.at, note: event.note ?? null }
    }),
  },
  delays: {
    // Relative to `now`, so a restored actor (REARM) waits only for what is left.
    ttl: ({ context }) => Math.max(0, context.expiresAt - context.now),
  },
  guards: {
    notExpired: ({ context, event }) => event.type === "DECIDE" && event.at < context.expiresAt,
    approves: ({ event }) => event.type === "DECIDE" && event.decision === "approve",
    denies: ({ event }) => event.type === "DECIDE" && event.decision === "deny",
  },
}).createMachine({
  id: "approval",
  description: "A material proposal awaiting a human decision, until expiresAt.",
  context: ({ input }) => ({ ...input, decidedBy: null, decidedAt: null, note: null }),
  initial: "pending",
  states: {
    pending: {
      description: "Awaiting a decision; expires at expiresAt. A DECIDE stamped at or after expiresAt is refused.",
      entry: [{ type: "persist", params: ref }],
      after: { ttl: "expired" },
      on: {
        DECIDE: [
          { guard: and(["notExpired", "approves"]), target: "approved", actions: "recordDecision" },
          { guard: and(["notExpired", "denies"]), target: "denied", actions: "recordDecision" },
        ],
        REARM: {
          target: "pending",
          reenter: true,
          actions: assign({
            now: ({ event }) => {
              assertEvent(event, "REARM")
              return event.now
            },
          }),
        },
      },
    },
    approved: {
      description: "Approved by a human before expiry; the conversation applies the proposal.",
      type: "final",
      entry: [
        { type: "persist", params: ref },
        { type: "decided", params: resolution("approved") },
      ],
      output: { status: "approved" },
    },
    denied: {
      description: "Denied by a human before expiry.",
      type: "final",
      entry: [
        { type: "persist", params: ref },
        { type: "decided", params: resolution("denied") },
      ],
      output: { status: "denied" },
    },
    expired: {
      description: "Nobody decided before expiresAt.",
      type: "final",
      entry: [
        { type: "persist", params: ref },
        { type: "decided", params: resolution("expired") },
      ],
      output: { status: "expired" },
    },
  },
  // `event` is the done event of the final state reached; its output names the status.
  output: ({ context, event }) => ({
    approvalId: context.approvalId,
    status: (event as unknown as { output: { status: ApprovalOutput["status"] } }).output.status,
    decidedBy: context.decidedBy,
    decidedAt: context.decidedAt,
  }),
})

export type ApprovalMachine = typeof approvalMachine
export type ApprovalSnapshot = SnapshotFrom<typeof approvalMachine>

export function approvalStatus(snapshot: ApprovalSnapshot): ApprovalStatus {
  if (snapshot.matches("approved")) return "approved"
  if (snapshot.matches("denied")) return "denied"
  if (snapshot.matches("expired")) return "expired"
  return "pending"
}
