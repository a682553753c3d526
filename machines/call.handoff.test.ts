// The call machine's handoff path (patch-in): HANDOFF while talking or holding → handingOff → a
// conference → settled as handed_off; the cases where it is refused.
import { describe, expect, it } from "vitest"
import {
  createActor,
  fromCallback,
  fromPromise,
  initialTransition,
  type SnapshotFrom,
  transition,
  waitFor,
} from "xstate"
import {
  type CallEvent,
  type CallInput,
  type ConverseInboundEvent,
  callMachine,
  type HandOffInput,
  type HandOffOutput,
  type HangUpInput,
  type HangUpOutput,
  type LineInput,
  type ReserveFundsInput,
  type SettleInput,
} from "./call.machine.js"

type CallSnapshot = SnapshotFrom<typeof callMachine>
type AnyEvent = CallEvent | { type: `xstate.${string}`; output?: unknown; error?: unknown }

const T0 = 1_700_000_000_000
const input: CallInput = {
  callId: 601,
  runId: 8,
  tenantId: 4,
  targetId: 91,
  phone: "+15555550105",
  attempt: 1,
  expectedSeconds: 180,
  maxCallMs: 300_000,
  ringTimeoutMs: 30_000,
  approvalHoldMs: 20_000,
  voicemail: "hang_up",
}
const HANDOFF: CallEvent = { type: "HANDOFF", operatorNumber: "+15555550199" }
const done = (id: string, output?: unknown): AnyEvent => ({ type: `xstate.done.actor.${id}`, output })
const error = (id: string): AnyEvent => ({ type: `xstate.error.actor.${id}`, error: new Error("no conference") })

function step(snapshot: CallSnapshot, ...events: AnyEvent[]) {
  for (const e of events) snapshot = transition(callMachine, snapshot, e as CallEvent)[0]
  return snapshot
}
const start = () => initialTransition(callMachine, input)[0]
const atDialing = () => step(start(), done("reserveFunds"))
const atTalking = () => step(atDialing(), { type: "RINGING" }, { type: "ANSWERED", by: "human", at: T0 })

describe("call machine: handoff transitions", () => {
  it("HANDOFF while talking → handingOff with the operator; the agent's conversation is left", () => {
    const s = step(atTalking(), HANDOFF)
    expect(s.value).toBe("handingOff")
    expect(s.context.operatorNumber).toBe("+15555550199")
    expect(s.children.converse).toBeUndefined()
    expect(s.children.handOff).toBeDefined()
  })

  it("HANDOFF while holding for an approval is accepted too (the hold is dropped)", () => {
    const holding = step(atTalking(), { type: "PROPOSE", action: "escalate", valueMinor: null, rationale: "human" })
    expect(holding.value).toEqual({ connected: "awaitingApproval" })
    expect(holding.can(HANDOFF)).toBe(true)
    expect(step(holding, HANDOFF).value).toBe("handingOff")
  })

  it("conference set up → settling with outcome handed_off, the conference id and endedAt from the handoff", () => {
    const out: HandOffOutput = { conferenceId: "conf-1", at: T0 + 42_300 }
    const s = step(atTalking(), HANDOFF, done("handOff", out))
    expect(s.value).toEqual({ settling: "attempt" })
    expect(s.context).toMatchObject({ outcome: "handed_off", conferenceId: "conf-1", connectedSeconds: 43 })
    const end = step(s, done("settle"))
    expect(end.status).toBe("done")
    expect(end.output).toMatchObject({ outcome: "handed_off", answered: true, retryable: false, settled: true })
  })

  it("a failed conference → hangingUp with outcome handoff_failed", () => {
    const s = step(atTalking(), HANDOFF, error("handOff"))
    expect(s.value).toBe("hangingUp")
    expect(s.context).toMatchObject({ outcome: "handoff_failed", failureReason: "no conference" })
  })

  describe("refused", () => {
    it("before the callee answered (reserving, dialing, ringing)", () => {
      expect(start().can(HANDOFF)).toBe(false)
      expect(atDialing().can(HANDOFF)).toBe(false)
      expect(step(atDialing(), { type: "RINGING" }).can(HANDOFF)).toBe(false)
    })
    it("on an answering machine", () => {
      const vm = step(atDialing(), { type: "ANSWERED", by: "machine", at: T0 })
      expect(vm.can(HANDOFF)).toBe(false)
    })
    it("a second HANDOFF while the first is being set up, and once handed off", () => {
      const handing = step(atTalking(), HANDOFF)
      expect(handing.can(HANDOFF)).toBe(false)
      const handed = step(handing, done("handOff", { conferenceId: "c", at: T0 + 1_000 }))
      expect(handed.can(HANDOFF)).toBe(false)
      expect(step(handed, done("settle")).can(HANDOFF)).toBe(false)
    })
    it("after the call ended (hanging up, settling, done)", () => {
      const ending = step(atTalking(), { type: "CALLEE_HUNG_UP", at: T0 + 5_000 })
      expect(ending.value).toBe("hangingUp")
      expect(ending.can(HANDOFF)).toBe(false)
      const settled = step(ending, done("hangUp", { at: T0 + 5_000 }), done("settle"))
      expect(settled.status).toBe("done")
      expect(settled.can(HANDOFF)).toBe(false)
    })
    it("conversation events while handing off", () => {
      const handing = step(atTalking(), HANDOFF)
      expect(handing.can({ type: "TURN", speaker: "agent", text: "x", at: T0 })).toBe(false)
      expect(handing.can({ type: "CONVERSATION_ENDED", outcome: "x", at: T0 })).toBe(false)
    })
  })
})

describe("call machine: handoff with stubbed effects", () => {
  it("talk → HANDOFF → the converse actor stops, the line is not hung up, settled as handed_off", async () => {
    const fx = { stopped: 0, handed: [] as HandOffInput[], hungUp: [] as HangUpInput[], settles: [] as SettleInput[] }
    const machine = callMachine.provide({
      actors: {
        reserveFunds: fromPromise<void, ReserveFundsInput>(async () => {}),
        placeCall: fromCallback<{ type: string }, LineInput>(({ sendBack }) => {
          sendBack({ type: "RINGING" })
          sendBack({ type: "ANSWERED", by: "human", at: T0 })
        }),
        converse: fromCallback<ConverseInboundEvent, LineInput>(({ sendBack }) => {
          sendBack({ type: "TURN", speaker: "agent", text: "Hello", at: T0 + 1_000 })
          return () => {
            fx.stopped++
          }
        }),
        handOff: fromPromise<HandOffOutput, HandOffInput>(async ({ input }) => {
          fx.handed.push(input)
          return { conferenceId: "conf-601", at: T0 + 30_000 }
        }),
        hangUp: fromPromise<HangUpOutput, HangUpInput>(async ({ input }) => {
          fx.hungUp.push(input)
          return { at: T0 }
        }),
        settle: fromPromise<void, SettleInput>(async ({ input }) => {
          fx.settles.push(input)
        }),
      },
    })
    const actor = createActor(machine, { input })
    actor.start()
    await waitFor(actor, (s) => s.matches({ connected: "talking" }) && s.context.turns === 1, { timeout: 2_000 })
    actor.send(HANDOFF)
    const end = await waitFor(actor, (s) => s.status === "done", { timeout: 2_000 })
    expect(end.output).toMatchObject({ callId: 601, outcome: "handed_off", connectedSeconds: 30, turns: 1 })
    expect(end.context.conferenceId).toBe("conf-601")
    expect(fx.stopped).toBe(1)
    expect(fx.handed).toEqual([{ callId: 601, tenantId: 4, operatorNumber: "+15555550199" }])
    expect(fx.hungUp).toEqual([])
    expect(fx.settles).toEqual([{ callId: 601, tenantId: 4, connectedSeconds: 30, outcome: "handed_off" }])
  })
})
