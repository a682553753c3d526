import { describe, expect, it } from "vitest"
import { createActor, initialTransition, transition } from "xstate"
import {
  type RunEvent,
  type RunInput,
  type RunRef,
  type RunSnapshot,
  type RunStatusChange,
  runMachine,
  runStatus,
} from "./run.machine.js"

const input: RunInput = { runId: 7, tenantId: 3, workflowId: 11 }

/** Apply events purely; returns the last snapshot and the names of every action on the way. */
function run(events: RunEvent[], from?: RunSnapshot) {
  let [snapshot, actions] = from === undefined ? initialTransition(runMachine, input) : [from, []]
  const log: Array<{ type: string; params: unknown }> = actions.map((a) => ({ type: a.type, params: a.params }))
  for (const event of events) {
    const [next, acts] = transition(runMachine, snapshot, event)
    snapshot = next
    log.push(...acts.map((a) => ({ type: a.type, params: a.params })))
  }
  return { snapshot, log }
}

const types = (log: Array<{ type: string }>) => log.map((a) => a.type).filter((t) => !t.startsWith("xstate."))
const statuses = (log: Array<{ type: string; params: unknown }>) =>
  log.filter((a) => a.type === "statusChanged").map((a) => (a.params as RunStatusChange).status)

describe("run machine: pure transitions", () => {
  it("starts running, reports running, starts the dialer and persists", () => {
    const { snapshot, log } = run([])
    expect(snapshot.value).toBe("running")
    expect(runStatus(snapshot)).toBe("running")
    expect(snapshot.context).toMatchObject({ ...input, active: 0, dialed: 0, queueEmpty: false, pauseReason: null })
    expect(types(log)).toEqual(["statusChanged", "persist", "startDialing"])
    expect(log[0]?.params).toEqual({ ...input, status: "running", reason: null })
  })

  it("counts calls", () => {
    const { snapshot } = run([
      { type: "CALL_STARTED" },
      { type: "CALL_STARTED" },
      { type: "CALL_CONNECTED" },
      { type: "CALL_ENDED", final: true },
      { type: "CALL_ENDED", final: false },
    ])
    expect(snapshot.context).toMatchObject({ active: 0, dialed: 2, connected: 1, finished: 1 })
    expect(snapshot.value).toBe("running")
  })

  it("completes once the queue is empty and no call is in flight (always)", () => {
    const a = run([{ type: "CALL_STARTED" }, { type: "QUEUE_EMPTY" }])
    expect(a.snapshot.value).toBe("running")
    const b = run([{ type: "CALL_ENDED", final: true }], a.snapshot)
    expect(b.snapshot.value).toBe("completed")
    expect(b.snapshot.status).toBe("done")
    expect(b.snapshot.output).toEqual({
      runId: 7,
      status: "completed",
      endReason: "all_targets_final",
      dialed: 1,
      connected: 0,
      finished: 1,
    })
    expect(types(b.log)).toEqual(["persist", "stopDialing", "persist", "statusChanged"])
    expect(statuses(b.log)).toEqual(["completed"])
  })

  it("completes at once on QUEUE_EMPTY with nothing in flight", () => {
    expect(run([{ type: "QUEUE_EMPTY" }]).snapshot.value).toBe("completed")
  })

  it("TARGETS_ADDED clears queueEmpty so the run does not complete", () => {
    const { snapshot } = run([
      { type: "CALL_STARTED" },
      { type: "QUEUE_EMPTY" },
      { type: "TARGETS_ADDED" },
      { type: "CALL_ENDED", final: true },
    ])
    expect(snapshot.value).toBe("running")
    expect(snapshot.context.queueEmpty).toBe(false)
  })

  it("pauses with calls in flight: pausing (reported running) until the last call ends, then paused", () => {
    const a = run([{ type: "CALL_STARTED" }, { type: "CALL_STARTED" }, { type: "PAUSE", reason: "user" }])
    expect(a.snapshot.value).toBe("pausing")
    expect(runStatus(a.snapshot)).toBe("running")
    expect(a.snapshot.context.pauseReason).toBe("user")
    expect(types(a.log)).toContain("stopDialing")
    const b = run([{ type: "CALL_CONNECTED" }, { type: "CALL_ENDED", final: true }], a.snapshot)
    expect(b.snapshot.value).toBe("pausing")
    const c = run([{ type: "CALL_ENDED", final: false }], b.snapshot)
    expect(c.snapshot.value).toBe("paused")
    expect(runStatus(c.snapshot)).toBe("paused")
    expect(c.log.filter((x) => x.type === "statusChanged")).toEqual([
      { type: "statusChanged", params: { ...input, status: "paused", reason: "user" } },
    ])
  })

  it("pauses at once with nothing in flight, for insufficient funds", () => {
    const { snapshot } = run([{ type: "PAUSE", reason: "insufficient_funds" }])
    expect(snapshot.value).toBe("paused")
    expect(snapshot.context.pauseReason).toBe("insufficient_funds")
  })

  it("pausing with an empty queue pauses rather than completes", () => {
    const { snapshot } = run([
      { type: "CALL_STARTED" },
      { type: "QUEUE_EMPTY" },
      { type: "PAUSE", reason: "user" },
      { type: "CALL_ENDED", final: true },
    ])
    expect(snapshot.value).toBe("paused")
  })

  it("resumes from pausing without a status change, and from paused with one", () => {
    const a = run([{ type: "CALL_STARTED" }, { type: "PAUSE", reason: "user" }, { type: "RESUME" }])
    expect(a.snapshot.value).toBe("running")
    expect(a.snapshot.context.pauseReason).toBeNull()
    expect(statuses(a.log)).toEqual(["running"]) // the initial one only

    const b = run([{ type: "PAUSE", reason: "insufficient_funds" }])
    expect(b.snapshot.value).toBe("paused")
    const c = run([{ type: "RESUME" }], b.snapshot)
    expect(c.snapshot.value).toBe("running")
    expect(c.snapshot.context).toMatchObject({ pauseReason: null, queueEmpty: false })
    expect(types(c.log)).toEqual(["statusChanged", "persist", "startDialing"])
    expect(statuses(c.log)).toEqual(["running"])
  })

  it("RESUME resets queueEmpty so the dialer looks again", () => {
    const a = run([
      { type: "CALL_STARTED" },
      { type: "QUEUE_EMPTY" },
      { type: "PAUSE", reason: "user" },
      { type: "CALL_ENDED", final: true },
      { type: "RESUME" },
    ])
    expect(a.snapshot.value).toBe("running")
    expect(a.snapshot.context.queueEmpty).toBe(false)
    expect(run([{ type: "QUEUE_EMPTY" }], a.snapshot).snapshot.value).toBe("completed")
  })

  it("cancels from running with calls in flight, then cancelled when they end", () => {
    const a = run([{ type: "CALL_STARTED" }, { type: "CANCEL" }])
    expect(a.snapshot.value).toBe("cancelling")
    expect(runStatus(a.snapshot)).toBe("running")
    expect(a.snapshot.context.endReason).toBe("user")
    const b = run([{ type: "CALL_ENDED", final: false }], a.snapshot)
    expect(b.snapshot.value).toBe("cancelled")
    expect(b.snapshot.output).toMatchObject({ status: "cancelled", endReason: "user" })
    expect(statuses(b.log)).toEqual(["cancelled"])
  })

  it("cancels from pausing and from paused", () => {
    expect(
      run([{ type: "CALL_STARTED" }, { type: "PAUSE", reason: "user" }, { type: "CANCEL", reason: "workflow_retired" }])
        .snapshot.value,
    ).toBe("cancelling")
    const { snapshot } = run([{ type: "PAUSE", reason: "user" }, { type: "CANCEL" }])
    expect(snapshot.value).toBe("cancelled")
    expect(runStatus(snapshot)).toBe("cancelled")
  })

  it("fails from every non-final state", () => {
    const froms: RunEvent[][] = [
      [],
      [{ type: "CALL_STARTED" }, { type: "PAUSE", reason: "user" }],
      [{ type: "PAUSE", reason: "user" }],
      [{ type: "CALL_STARTED" }, { type: "CANCEL" }],
    ]
    for (const events of froms) {
      const { snapshot } = run([...events, { type: "FAIL", reason: "provider down" }])
      expect(snapshot.value).toBe("failed")
      expect(runStatus(snapshot)).toBe("failed")
      expect(snapshot.output).toMatchObject({ status: "failed", endReason: "provider down" })
    }
  })

  describe("refused events (snapshot.can === false)", () => {
    const running = run([]).snapshot
    const pausing = run([{ type: "CALL_STARTED" }, { type: "PAUSE", reason: "user" }]).snapshot
    const paused = run([{ type: "PAUSE", reason: "user" }]).snapshot
    const cancelling = run([{ type: "CALL_STARTED" }, { type: "CANCEL" }]).snapshot
    const completed = run([{ type: "QUEUE_EMPTY" }]).snapshot
    const cancelled = run([{ type: "CANCEL" }]).snapshot
    const failed = run([{ type: "FAIL", reason: "x" }]).snapshot

    it("RESUME while running, PAUSE while paused or pausing", () => {
      expect(running.can({ type: "RESUME" })).toBe(false)
      expect(paused.can({ type: "PAUSE", reason: "user" })).toBe(false)
      expect(pausing.can({ type: "PAUSE", reason: "user" })).toBe(false)
      expect(running.can({ type: "PAUSE", reason: "user" })).toBe(true)
      expect(pausing.can({ type: "RESUME" })).toBe(true)
      expect(paused.can({ type: "RESUME" })).toBe(true)
    })

    it("calls events only where calls can be in flight", () => {
      for (const s of [running, pausing, cancelling]) {
        expect(s.can({ type: "CALL_STARTED" })).toBe(true)
        expect(s.can({ type: "CALL_ENDED", final: true })).toBe(true)
        expect(s.can({ type: "CALL_CONNECTED" })).toBe(true)
      }
      expect(paused.can({ type: "CALL_STARTED" })).toBe(false)
      expect(paused.can({ type: "CALL_ENDED", final: true })).toBe(false)
    })

    it("cancelling refuses RESUME, PAUSE and a second CANCEL", () => {
      expect(cancelling.can({ type: "RESUME" })).toBe(false)
      expect(cancelling.can({ type: "PAUSE", reason: "user" })).toBe(false)
      expect(cancelling.can({ type: "CANCEL" })).toBe(false)
      expect(cancelling.can({ type: "FAIL", reason: "x" })).toBe(true)
    })

    it("anything in a final state", () => {
      const all: RunEvent[] = [
        { type: "CALL_STARTED" },
        { type: "CALL_CONNECTED" },
        { type: "CALL_ENDED", final: true },
        { type: "QUEUE_EMPTY" },
        { type: "TARGETS_ADDED" },
        { type: "PAUSE", reason: "user" },
        { type: "RESUME" },
        { type: "CANCEL" },
        { type: "FAIL", reason: "x" },
      ]
      for (const s of [completed, cancelled, failed]) {
        expect(s.status).toBe("done")
        for (const e of all) expect(s.can(e), `${String(s.value)} ${e.type}`).toBe(false)
      }
    })
  })
})

describe("run machine: actor with provided actions", () => {
  it("calls the runtime's actions with run ids, and reaches the output", () => {
    const calls: string[] = []
    const machine = runMachine.provide({
      actions: {
        persist: () => void calls.push("persist"),
        startDialing: (_, p: RunRef) => void calls.push(`start:${p.runId}`),
        stopDialing: (_, p: RunRef) => void calls.push(`stop:${p.runId}`),
        statusChanged: (_, p: RunStatusChange) => void calls.push(`status:${p.status}`),
      },
    })
    const actor = createActor(machine, { input }).start()
    actor.send({ type: "CALL_STARTED" })
    actor.send({ type: "PAUSE", reason: "user" })
    actor.send({ type: "CALL_ENDED", final: true })
    actor.send({ type: "RESUME" })
    actor.send({ type: "QUEUE_EMPTY" })
    expect(actor.getSnapshot().status).toBe("done")
    expect(actor.getSnapshot().output).toEqual({
      runId: 7,
      status: "completed",
      endReason: "all_targets_final",
      dialed: 1,
      connected: 0,
      finished: 1,
    })
    expect(calls.filter((c) => c !== "persist")).toEqual([
      "status:running",
      "start:7",
      "stop:7",
      "status:paused",
      "status:running",
      "start:7",
      "stop:7",
      "status:completed",
    ])
    expect(calls.filter((c) => c === "persist").length).toBeGreaterThanOrEqual(6)
  })
})

describe("run machine: persistence round trip", () => {
  it("persists while pausing with calls in flight, restores, and finishes the same way", () => {
    const script: RunEvent[] = [
      { type: "CALL_STARTED" },
      { type: "CALL_CONNECTED" },
      { type: "CALL_STARTED" },
      { type: "PAUSE", reason: "user" },
    ]
    const rest: RunEvent[] = [
      { type: "CALL_ENDED", final: true },
      { type: "CALL_ENDED", final: false },
      { type: "RESUME" },
      { type: "CALL_STARTED" },
      { type: "QUEUE_EMPTY" },
      { type: "CALL_ENDED", final: true },
    ]

    const straight = createActor(runMachine, { input }).start()
    for (const e of [...script, ...rest]) straight.send(e)

    const first = createActor(runMachine, { input }).start()
    for (const e of script) first.send(e)
    const stored = JSON.stringify(first.getPersistedSnapshot())
    first.stop()

    const restored = createActor(runMachine, { snapshot: JSON.parse(stored), input }).start()
    expect(restored.getSnapshot().value).toBe("pausing")
    expect(restored.getSnapshot().context).toMatchObject({ active: 2, connected: 1, pauseReason: "user" })
    for (const e of rest) restored.send(e)

    expect(restored.getSnapshot().status).toBe("done")
    expect(restored.getSnapshot().output).toEqual(straight.getSnapshot().output)
    expect(restored.getSnapshot().output).toEqual({
      runId: 7,
      status: "completed",
      endReason: "all_targets_final",
      dialed: 3,
      connected: 1,
      finished: 2,
    })
  })
})
