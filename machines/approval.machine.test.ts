import { describe, expect, it } from "vitest"
import { createActor, initialTransition, SimulatedClock, transition } from "xstate"
import {
  type ApprovalEvent,
  type ApprovalInput,
  type ApprovalOutput,
  type ApprovalResolution,
  type ApprovalSnapshot,
  approvalMachine,
  approvalStatus,
} from "./approval.machine.js"

const T0 = 1_700_000_000_000
const TTL = 15 * 60_000

const input: ApprovalInput = {
  approvalId: 55,
  tenantId: 3,
  runId: 7,
  callId: 501,
  action: "concession",
  valueMinor: 1_000,
  expiresAt: T0 + TTL,
  now: T0,
}

const approve = (at: number, note?: string): ApprovalEvent => ({
  type: "DECIDE",
  decision: "approve",
  by: 42,
  at,
  ...(note === undefined ? {} : { note }),
})
const deny = (at: number): ApprovalEvent => ({ type: "DECIDE", decision: "deny", by: 42, at })

function step(snapshot: ApprovalSnapshot, event: ApprovalEvent | { type: string }) {
  const [next, actions] = transition(approvalMachine, snapshot, event as ApprovalEvent)
  return { snapshot: next, actions: actions.map((a) => ({ type: a.type, params: a.params })) }
}
const pending = () => initialTransition(approvalMachine, input)[0]
const expiryEvent = { type: "xstate.after.ttl.approval.pending" }

describe("approval machine: pure transitions", () => {
  it("starts pending and persists", () => {
    const [s, actions] = initialTransition(approvalMachine, input)
    expect(s.value).toBe("pending")
    expect(approvalStatus(s)).toBe("pending")
    expect(s.context).toMatchObject({ ...input, decidedBy: null, decidedAt: null, note: null })
    expect(actions.map((a) => a.type)).toContain("persist")
  })

  it("approve before expiry → approved, records who, when and the note, notifies", () => {
    const { snapshot, actions } = step(pending(), approve(T0 + 1_000, "ok, 10 off"))
    expect(snapshot.value).toBe("approved")
    expect(snapshot.context).toMatchObject({ decidedBy: 42, decidedAt: T0 + 1_000, note: "ok, 10 off" })
    expect(snapshot.output).toEqual<ApprovalOutput>({
      approvalId: 55,
      status: "approved",
      decidedBy: 42,
      decidedAt: T0 + 1_000,
    })
    expect(actions.find((a) => a.type === "decided")?.params).toEqual<ApprovalResolution>({
      approvalId: 55,
      tenantId: 3,
      runId: 7,
      callId: 501,
      status: "approved",
      decidedBy: 42,
      decidedAt: T0 + 1_000,
      note: "ok, 10 off",
    })
  })

  it("deny before expiry → denied", () => {
    const { snapshot } = step(pending(), deny(T0 + TTL - 1))
    expect(approvalStatus(snapshot)).toBe("denied")
    expect(snapshot.output).toEqual({ approvalId: 55, status: "denied", decidedBy: 42, decidedAt: T0 + TTL - 1 })
    expect(snapshot.context.note).toBeNull()
  })

  it("expiry → expired, nobody decided", () => {
    const { snapshot, actions } = step(pending(), expiryEvent)
    expect(snapshot.value).toBe("expired")
    expect(snapshot.output).toEqual({ approvalId: 55, status: "expired", decidedBy: null, decidedAt: null })
    expect((actions.find((a) => a.type === "decided")!.params as ApprovalResolution).status).toBe("expired")
  })

  it("REARM past expiry re-enters pending (the ttl delay resolves to 0)", () => {
    const { snapshot } = step(pending(), { type: "REARM", now: T0 + TTL + 5 })
    expect(snapshot.value).toBe("pending")
    expect(snapshot.context.now).toBe(T0 + TTL + 5)
  })

  describe("refused events (snapshot.can === false)", () => {
    it("DECIDE stamped at or after expiresAt, even while still pending", () => {
      const s = pending()
      expect(s.can(approve(T0 + TTL))).toBe(false)
      expect(s.can(deny(T0 + TTL + 1))).toBe(false)
      expect(s.can(approve(T0 + TTL - 1))).toBe(true)
    })
    it("DECIDE after approved, denied or expired (409)", () => {
      for (const s of [
        step(pending(), approve(T0)).snapshot,
        step(pending(), deny(T0)).snapshot,
        step(pending(), expiryEvent).snapshot,
      ]) {
        expect(s.status).toBe("done")
        expect(s.can(approve(T0 + 1))).toBe(false)
        expect(s.can(deny(T0 + 1))).toBe(false)
        expect(s.can({ type: "REARM", now: T0 })).toBe(false)
      }
    })
  })
})

describe("approval machine: actor with provided actions", () => {
  it("calls persist and decided", () => {
    const calls: string[] = []
    const machine = approvalMachine.provide({
      actions: {
        persist: () => void calls.push("persist"),
        decided: (_, p: ApprovalResolution) => void calls.push(`decided:${p.status}:${p.decidedBy}`),
      },
    })
    const actor = createActor(machine, { input, clock: new SimulatedClock() }).start()
    actor.send(deny(T0 + 10))
    expect(calls).toEqual(["persist", "persist", "decided:denied:42"])
    expect(actor.getSnapshot().output?.status).toBe("denied")
  })
})

describe("approval machine: timers under a simulated clock", () => {
  it("expires ttl = expiresAt - now after creation", () => {
    const clock = new SimulatedClock()
    const actor = createActor(approvalMachine, { input, clock }).start()
    clock.increment(TTL - 1)
    expect(actor.getSnapshot().value).toBe("pending")
    clock.increment(1)
    expect(actor.getSnapshot().value).toBe("expired")
    expect(actor.getSnapshot().output).toEqual({ approvalId: 55, status: "expired", decidedBy: null, decidedAt: null })
  })

  it("created late (now past expiresAt) expires at once", () => {
    const clock = new SimulatedClock()
    const actor = createActor(approvalMachine, { input: { ...input, now: T0 + TTL + 1 }, clock }).start()
    clock.increment(0)
    expect(actor.getSnapshot().value).toBe("expired")
  })

  it("a decision cancels the expiry timer", () => {
    const clock = new SimulatedClock()
    const actor = createActor(approvalMachine, { input, clock }).start()
    clock.increment(60_000)
    actor.send(approve(T0 + 60_000))
    clock.increment(TTL)
    expect(actor.getSnapshot().output?.status).toBe("approved")
  })

  it("restored: REARM re-arms the expiry with the remaining ttl (timers are not persisted by xstate)", () => {
    const clock = new SimulatedClock()
    const first = createActor(approvalMachine, { input, clock }).start()
    clock.increment(5 * 60_000)
    const stored = JSON.stringify(first.getPersistedSnapshot())
    first.stop()

    const clock2 = new SimulatedClock()
    const restored = createActor(approvalMachine, { snapshot: JSON.parse(stored), input, clock: clock2 }).start()
    // Without REARM a restored pending actor would wait forever.
    clock2.increment(TTL * 2)
    expect(restored.getSnapshot().value).toBe("pending")

    const clock3 = new SimulatedClock()
    const rearmed = createActor(approvalMachine, { snapshot: JSON.parse(stored), input, clock: clock3 }).start()
    rearmed.send({ type: "REARM", now: T0 + 5 * 60_000 })
    clock3.increment(10 * 60_000 - 1)
    expect(rearmed.getSnapshot().value).toBe("pending")
    clock3.increment(1)
    expect(rearmed.getSnapshot().value).toBe("expired")
  })

  it("restored after the expiry passed: REARM expires it at once", () => {
    const first = createActor(approvalMachine, { input, clock: new SimulatedClock() }).start()
    const stored = JSON.stringify(first.getPersistedSnapshot())
    first.stop()
    const clock = new SimulatedClock()
    const restored = createActor(approvalMachine, { snapshot: JSON.parse(stored), input, clock }).start()
    restored.send({ type: "REARM", now: T0 + TTL + 60_000 })
    clock.increment(0)
    expect(restored.getSnapshot().output?.status).toBe("expired")
  })
})

describe("approval machine: persistence round trip", () => {
  it("persist pending, restore, decide: same output as uninterrupted", () => {
    const decision = approve(T0 + 120_000, "fine")
    const straight = createActor(approvalMachine, { input, clock: new SimulatedClock() }).start()
    straight.send(decision)

    const first = createActor(approvalMachine, { input, clock: new SimulatedClock() }).start()
    const stored = JSON.parse(JSON.stringify(first.getPersistedSnapshot()))
    first.stop()
    const restored = createActor(approvalMachine, { snapshot: stored, input, clock: new SimulatedClock() }).start()
    restored.send({ type: "REARM", now: T0 + 100_000 })
    restored.send(decision)

    expect(restored.getSnapshot().status).toBe("done")
    expect(restored.getSnapshot().output).toEqual(straight.getSnapshot().output)
    expect(restored.getSnapshot().context.note).toBe("fine")
  })
})
