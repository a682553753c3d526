import { describe, expect, it } from "vitest"
import { createActor, initialTransition, transition } from "xstate"
import {
  type BatchRelease,
  SIM_CAMPAIGN_STATES,
  type SimCampaignEvent,
  type SimCampaignInput,
  type SimCampaignSnapshot,
  type SimCampaignState,
  simCampaignMachine,
  simCampaignSnapshot,
  simCampaignState,
} from "./sim-campaign.machine.js"

const input: SimCampaignInput = { campaignId: 9, size: 25, batchSize: 10, released: 0 }

function step(snapshot: SimCampaignSnapshot, event: SimCampaignEvent) {
  const [next, actions] = transition(simCampaignMachine, snapshot, event)
  return { snapshot: next, actions: actions.map((a) => ({ type: a.type, params: a.params })) }
}
const at = (state: SimCampaignState, released = 10) => simCampaignSnapshot(state, { ...input, released })

const E = {
  runBatch: { type: "RUN_BATCH" },
  answer: { type: "ANSWER", questionId: 77 },
  resume: { type: "RESUME", inFlight: false },
  resumeInFlight: { type: "RESUME", inFlight: true },
  stop: { type: "STOP" },
  asked: { type: "QUESTION_ASKED", questionId: 77 },
  answered: { type: "QUESTION_ANSWERED" },
  batchDone: { type: "BATCH_DONE" },
  allDone: { type: "ALL_DONE" },
  failed: { type: "FAILED", reason: "run_failed" },
} as const satisfies Record<string, SimCampaignEvent>
type Name = keyof typeof E

/** Every event each state accepts; all the others are refused (409 SIM_CAMPAIGN_STATE for commands). */
const ACCEPTS: Record<SimCampaignState, ReadonlyArray<Name>> = {
  ready: ["runBatch", "stop", "allDone", "failed"],
  running: ["asked", "batchDone", "allDone", "stop", "failed"],
  awaiting_answer: ["answer", "answered", "allDone", "stop", "failed"],
  stopped: ["resume", "resumeInFlight", "stop", "answer", "allDone", "failed"],
  completed: [],
  failed: [],
}

describe("sim campaign machine: pure transitions", () => {
  it("starts ready with the input as context, and does nothing on entry", () => {
    const [s, actions] = initialTransition(simCampaignMachine, input)
    expect(simCampaignState(s)).toBe("ready")
    expect(s.context).toEqual(input)
    expect(actions).toEqual([])
  })

  it("RUN_BATCH: ready → running, releasing batch_size callees", () => {
    const { snapshot, actions } = step(at("ready", 0), E.runBatch)
    expect(simCampaignState(snapshot)).toBe("running")
    expect(snapshot.context.released).toBe(10)
    expect(actions).toEqual([{ type: "releaseBatch", params: { campaignId: 9, count: 10 } satisfies BatchRelease }])
  })

  it("the last batch releases only what is left", () => {
    const { snapshot, actions } = step(at("ready", 20), E.runBatch)
    expect(snapshot.context.released).toBe(25)
    expect(actions.find((a) => a.type === "releaseBatch")?.params).toEqual({ campaignId: 9, count: 5 })
  })

  it("a whole campaign: batch, question, answer, batch done, … all done", () => {
    let s = at("ready", 0)
    const path: SimCampaignState[] = []
    for (const e of [
      E.runBatch,
      E.asked,
      E.answer,
      E.batchDone,
      E.runBatch,
      E.asked,
      E.answered,
      E.batchDone,
      E.runBatch,
      E.allDone,
    ]) {
      s = step(s, e).snapshot
      path.push(simCampaignState(s))
    }
    expect(path).toEqual([
      "running",
      "awaiting_answer",
      "running",
      "ready",
      "running",
      "awaiting_answer",
      "running",
      "ready",
      "running",
      "completed",
    ])
    expect(s.status).toBe("done")
    expect(s.context.released).toBe(25)
  })

  it("STOP from each active state → stopped, asking the service to stop dialing", () => {
    for (const state of ["ready", "running", "awaiting_answer"] as const) {
      const { snapshot, actions } = step(at(state), E.stop)
      expect(simCampaignState(snapshot)).toBe("stopped")
      expect(actions).toEqual([{ type: "stopDialing", params: { campaignId: 9 } }])
    }
  })

  it("STOP when stopped is a no-op (idempotent 200): same state, no action", () => {
    const { snapshot, actions } = step(at("stopped"), E.stop)
    expect(simCampaignState(snapshot)).toBe("stopped")
    expect(actions).toEqual([])
  })

  it("RESUME: stopped → ready, or running while the stopped batch's conversations are in flight", () => {
    expect(simCampaignState(step(at("stopped"), E.resume).snapshot)).toBe("ready")
    expect(simCampaignState(step(at("stopped"), E.resumeInFlight).snapshot)).toBe("running")
  })

  it("ANSWER when stopped answers a held conversation and stays stopped", () => {
    const { snapshot, actions } = step(at("stopped"), E.answer)
    expect(simCampaignState(snapshot)).toBe("stopped")
    expect(actions).toEqual([])
  })

  it("ALL_DONE completes and FAILED fails from every state that is not final", () => {
    for (const state of ["ready", "running", "awaiting_answer", "stopped"] as const) {
      expect(simCampaignState(step(at(state), E.allDone).snapshot)).toBe("completed")
      expect(simCampaignState(step(at(state), E.failed).snapshot)).toBe("failed")
    }
  })

  describe("refused events (snapshot.can === false → 409 SIM_CAMPAIGN_STATE)", () => {
    for (const state of SIM_CAMPAIGN_STATES)
      for (const name of Object.keys(E) as Name[])
        if (!ACCEPTS[state].includes(name))
          it(`${state} refuses ${name}`, () => {
            const s = at(state)
            expect(s.can(E[name])).toBe(false)
            // A refused event leaves the snapshot as it was.
            expect(simCampaignState(step(s, E[name]).snapshot)).toBe(state)
          })

    it("every accepted event is accepted (the table above is the whole truth)", () => {
      for (const state of SIM_CAMPAIGN_STATES)
        for (const name of ACCEPTS[state]) expect(at(state).can(E[name])).toBe(true)
    })

    it("RUN_BATCH when every callee is already released", () => {
      expect(at("ready", 25).can(E.runBatch)).toBe(false)
      expect(at("ready", 24).can(E.runBatch)).toBe(true)
    })
  })
})

describe("sim campaign machine: actor with provided actions", () => {
  it("calls releaseBatch and stopDialing with their params", () => {
    const calls: string[] = []
    const machine = simCampaignMachine.provide({
      actions: {
        releaseBatch: (_, p: BatchRelease) => void calls.push(`release:${p.count}`),
        stopDialing: (_, p: { campaignId: number }) => void calls.push(`stop:${p.campaignId}`),
      },
    })
    const actor = createActor(machine, { input }).start()
    actor.send(E.runBatch)
    actor.send(E.stop)
    actor.send(E.stop)
    actor.send(E.resume)
    actor.send(E.runBatch)
    expect(calls).toEqual(["release:10", "stop:9", "release:10"])
    expect(actor.getSnapshot().context.released).toBe(20)
  })
})

describe("sim campaign machine: persistence round trip", () => {
  it("the stored state and counters restore the same behaviour as the live actor", () => {
    const live = createActor(simCampaignMachine, { input }).start()
    live.send(E.runBatch)
    live.send(E.asked)
    const stored = JSON.parse(
      JSON.stringify({ state: simCampaignState(live.getSnapshot()), ...live.getSnapshot().context }),
    )
    const restored = simCampaignSnapshot(stored.state, {
      campaignId: stored.campaignId,
      size: stored.size,
      batchSize: stored.batchSize,
      released: stored.released,
    })
    expect(simCampaignState(restored)).toBe("awaiting_answer")
    expect(restored.context).toEqual(live.getSnapshot().context)
    live.send(E.answer)
    expect(simCampaignState(step(restored, E.answer).snapshot)).toBe(simCampaignState(live.getSnapshot()))

    const full = JSON.parse(JSON.stringify(live.getPersistedSnapshot()))
    const again = createActor(simCampaignMachine, { snapshot: full, input }).start()
    again.send(E.batchDone)
    expect(simCampaignState(again.getSnapshot())).toBe("ready")
  })

  it("a final state restores as done and accepts nothing", () => {
    for (const state of ["completed", "failed"] as const) {
      const s = at(state)
      expect(s.status).toBe("done")
      for (const e of Object.values(E)) expect(s.can(e)).toBe(false)
    }
  })
})
