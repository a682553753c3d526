import { describe, expect, it } from "vitest"
import {
  createActor,
  type EventObject,
  fromCallback,
  fromPromise,
  initialTransition,
  SimulatedClock,
  type SnapshotFrom,
  transition,
  waitFor,
} from "xstate"
import {
  type ApprovalRequest,
  type CallEvent,
  type CallInput,
  type CallOutput,
  type ConversationEvent,
  type ConverseInboundEvent,
  type ConverseInput,
  callMachine,
  type HangUpInput,
  type HangUpOutput,
  type LineInput,
  type ReserveFundsInput,
  type SettleInput,
  type TelephonyEvent,
} from "./call.machine.js"

type CallSnapshot = SnapshotFrom<typeof callMachine>

const T0 = 1_700_000_000_000

const input: CallInput = {
  callId: 501,
  runId: 7,
  tenantId: 3,
  targetId: 90,
  phone: "+15555550107",
  attempt: 1,
  expectedSeconds: 180,
  maxCallMs: 300_000,
  ringTimeoutMs: 30_000,
  approvalHoldMs: 20_000,
  voicemail: "hang_up",
}

// ---------------------------------------------------------------------------------------------
// Layer 1: pure transitions
// ---------------------------------------------------------------------------------------------

// Done/error events of invoked actors are internal (not in CallEvent); the pure layer sends them by hand.
type AnyCallEvent = CallEvent | { type: `xstate.${string}`; output?: unknown; error?: unknown }
const done = (id: string, output?: unknown): AnyCallEvent => ({ type: `xstate.done.actor.${id}`, output })
const error = (id: string, err: unknown = new Error("boom")): AnyCallEvent => ({
  type: `xstate.error.actor.${id}`,
  error: err,
})

function step(snapshot: CallSnapshot, ...events: AnyCallEvent[]) {
  const actions: Array<{ type: string; params: unknown }> = []
  for (const event of events) {
    const [next, acts] = transition(callMachine, snapshot, event as CallEvent)
    snapshot = next
    actions.push(...acts.map((a) => ({ type: a.type, params: a.params })))
  }
  return { snapshot, actions }
}

const start = (over: Partial<CallInput> = {}) => initialTransition(callMachine, { ...input, ...over })[0]
const atDialing = (over: Partial<CallInput> = {}) => step(start(over), done("reserveFunds")).snapshot
const atConnected = () => step(atDialing(), { type: "RINGING" }, { type: "ANSWERED", by: "human", at: T0 }).snapshot

describe("call machine: pure transitions", () => {
  it("starts by reserving funds", () => {
    const s = start()
    expect(s.value).toBe("reserving")
    expect(s.context).toMatchObject({ ...input, answeredAt: null, outcome: null, turns: 0, funded: false })
  })

  it("insufficient funds: done without dialing, funded false", () => {
    const { snapshot } = step(start(), error("reserveFunds", new Error("INSUFFICIENT_FUNDS")))
    expect(snapshot.status).toBe("done")
    expect(snapshot.output).toEqual<CallOutput>({
      callId: 501,
      outcome: "insufficient_funds",
      connectedSeconds: 0,
      answered: false,
      retryable: false,
      funded: false,
      settled: true,
      turns: 0,
    })
  })

  it("reserved → dialing.connecting → ringing", () => {
    const s = atDialing()
    expect(s.value).toEqual({ dialing: "connecting" })
    expect(s.context.funded).toBe(true)
    expect(step(s, { type: "RINGING" }).snapshot.value).toEqual({ dialing: "ringing" })
  })

  it("answered by a human → connected.talking with answeredAt from the event", () => {
    const s = atConnected()
    expect(s.value).toEqual({ connected: "talking" })
    expect(s.context.answeredAt).toBe(T0)
  })

  it("answered by a machine → voicemail: leave the line, or hang up", () => {
    const leave = step(atDialing({ voicemail: "leave_opening_line" }), {
      type: "ANSWERED",
      by: "machine",
      at: T0,
    }).snapshot
    expect(leave.value).toEqual({ voicemail: "leavingMessage" })
    expect(step(leave, done("leaveMessage")).snapshot.context.outcome).toBe("voicemail_left")
    expect(step(leave, done("leaveMessage")).snapshot.value).toBe("hangingUp")
    expect(step(leave, error("leaveMessage")).snapshot.context.outcome).toBe("voicemail")

    const hang = step(atDialing({ voicemail: "hang_up" }), { type: "ANSWERED", by: "machine", at: T0 }).snapshot
    expect(hang.value).toBe("hangingUp")
    expect(hang.context).toMatchObject({ outcome: "voicemail", answeredAt: null })
  })

  it("busy, no answer and failure go straight to settling (no line to release)", () => {
    for (const [event, outcome] of [
      [{ type: "BUSY" }, "busy"],
      [{ type: "NO_ANSWER" }, "no_answer"],
      [{ type: "FAILED", reason: "invalid number" }, "failed"],
    ] as const) {
      const s = step(atDialing(), { type: "RINGING" }, event).snapshot
      expect(s.value).toEqual({ settling: "attempt" })
      expect(s.context.outcome).toBe(outcome)
      expect(s.context.connectedSeconds).toBe(0)
    }
    expect(step(atDialing(), { type: "FAILED", reason: "invalid number" }).snapshot.context.failureReason).toBe(
      "invalid number",
    )
  })

  it("ring timeout (the dialing state's delayed event) → no_answer → hangingUp", () => {
    const s = step(atDialing(), { type: "RINGING" }, { type: "xstate.after.ringTimeout.call.dialing" }).snapshot
    expect(s.value).toBe("hangingUp")
    expect(s.context.outcome).toBe("no_answer")
  })

  it("a placeCall actor error is a failed call that still hangs up", () => {
    const s = step(atDialing(), error("placeCall", new Error("telco 500"))).snapshot
    expect(s.value).toBe("hangingUp")
    expect(s.context).toMatchObject({ outcome: "failed", failureReason: "telco 500" })
  })

  it("counts turns in both substates of connected", () => {
    const turn: CallEvent = { type: "TURN", speaker: "agent", text: "hi", at: T0 + 1 }
    const { snapshot } = step(
      atConnected(),
      turn,
      turn,
      { type: "PROPOSE", action: "callback", valueMinor: null, rationale: "asked" },
      turn,
    )
    expect(snapshot.context.turns).toBe(3)
    expect(snapshot.value).toEqual({ connected: "awaitingApproval" })
  })

  it("PROPOSE → awaitingApproval, asks the runtime for an approval", () => {
    const { snapshot, actions } = step(atConnected(), {
      type: "PROPOSE",
      action: "concession",
      valueMinor: 500,
      rationale: "price",
    })
    expect(snapshot.context.pendingProposal).toEqual({ action: "concession", valueMinor: 500, rationale: "price" })
    const request = actions.find((a) => a.type === "requestApproval")
    expect(request?.params).toEqual<ApprovalRequest>({
      callId: 501,
      runId: 7,
      tenantId: 3,
      targetId: 90,
      phone: input.phone,
      proposal: { action: "concession", valueMinor: 500, rationale: "price" },
    })
  })

  it("APPROVAL_DECIDED must match the created approval; then back to talking, forwarded to converse", () => {
    const waiting = step(atConnected(), {
      type: "PROPOSE",
      action: "concession",
      valueMinor: 500,
      rationale: "price",
    }).snapshot
    const decided = { type: "APPROVAL_DECIDED", approvalId: 55, decision: "approved" } as const
    expect(waiting.can(decided)).toBe(false) // not created yet
    const created = step(waiting, { type: "APPROVAL_CREATED", approvalId: 55 }).snapshot
    expect(created.context.approvalId).toBe(55)
    expect(created.can({ ...decided, approvalId: 56 })).toBe(false)
    expect(created.can(decided)).toBe(true)
    const { snapshot, actions } = step(created, decided)
    expect(snapshot.value).toEqual({ connected: "talking" })
    expect(snapshot.context).toMatchObject({ pendingProposal: null, approvalId: null })
    expect(actions.some((a) => a.type === "xstate.sendTo")).toBe(true)
  })

  it("approval hold (delayed event) → back to talking, proposal cleared", () => {
    const waiting = step(
      atConnected(),
      { type: "PROPOSE", action: "escalate", valueMinor: null, rationale: "human" },
      { type: "APPROVAL_CREATED", approvalId: 9 },
    ).snapshot
    const { snapshot } = step(waiting, { type: "xstate.after.approvalHold.call.connected.awaitingApproval" })
    expect(snapshot.value).toEqual({ connected: "talking" })
    expect(snapshot.context).toMatchObject({ pendingProposal: null, approvalId: null })
  })

  it("conversation end and callee hang-up stamp endedAt from the event", () => {
    const ended = step(atConnected(), { type: "CONVERSATION_ENDED", outcome: "interested", at: T0 + 61_200 }).snapshot
    expect(ended.value).toBe("hangingUp")
    expect(ended.context).toMatchObject({ outcome: "interested", endedAt: T0 + 61_200 })
    const hung = step(atConnected(), { type: "CALLEE_HUNG_UP", at: T0 + 5_000 }).snapshot
    expect(hung.context).toMatchObject({ outcome: "callee_hung_up", endedAt: T0 + 5_000 })
  })

  it("max duration stamps endedAt = answeredAt + maxCallMs", () => {
    const s = step(atConnected(), { type: "xstate.after.maxCall.call.connected" }).snapshot
    expect(s.value).toBe("hangingUp")
    expect(s.context).toMatchObject({ outcome: "max_duration", endedAt: T0 + input.maxCallMs })
  })

  it("settling computes connectedSeconds = ceil(seconds answered); hangUp failure still settles", () => {
    const hanging = step(atConnected(), { type: "CONVERSATION_ENDED", outcome: "declined", at: T0 + 42_001 }).snapshot
    const viaDone = step(hanging, done("hangUp", { at: T0 + 43_000 } satisfies HangUpOutput)).snapshot
    expect(viaDone.value).toEqual({ settling: "attempt" })
    expect(viaDone.context.connectedSeconds).toBe(43)
    expect(viaDone.context.endedAt).toBe(T0 + 42_001) // the event's stamp wins over hangUp's
    const viaError = step(hanging, error("hangUp")).snapshot
    expect(viaError.value).toEqual({ settling: "attempt" })
    expect(viaError.context.connectedSeconds).toBe(43)
  })

  it("hangUp's release time stands in for endedAt when no event stamped it", () => {
    const broken = step(atConnected(), error("converse", new Error("llm down"))).snapshot
    expect(broken.context).toMatchObject({ outcome: "agent_error", endedAt: null })
    const s = step(broken, done("hangUp", { at: T0 + 9_500 })).snapshot
    expect(s.context).toMatchObject({ endedAt: T0 + 9_500, connectedSeconds: 10 })
  })

  it("settle retries 5 times after the first failure, then gives up with settled false", () => {
    let s = step(atDialing(), { type: "BUSY" }).snapshot
    for (let i = 1; i <= 5; i++) {
      s = step(s, error("settle")).snapshot
      expect(s.value).toEqual({ settling: "backoff" })
      expect(s.context.settleFailures).toBe(i)
      s = step(s, { type: "xstate.after.settleRetry.call.settling.backoff" }).snapshot
      expect(s.value).toEqual({ settling: "attempt" })
    }
    s = step(s, error("settle")).snapshot
    expect(s.status).toBe("done")
    expect(s.output).toMatchObject({ outcome: "busy", settled: false, retryable: true, funded: true })
  })

  it("settle success → done with the output", () => {
    const hanging = step(
      atConnected(),
      { type: "TURN", speaker: "callee", text: "yes", at: T0 + 1 },
      { type: "CONVERSATION_ENDED", outcome: "interested", at: T0 + 30_000 },
    ).snapshot
    const s = step(hanging, done("hangUp", { at: T0 + 30_500 }), done("settle")).snapshot
    expect(s.output).toEqual<CallOutput>({
      callId: 501,
      outcome: "interested",
      connectedSeconds: 30,
      answered: true,
      retryable: false,
      funded: true,
      settled: true,
      turns: 1,
    })
  })

  describe("refused events (snapshot.can === false)", () => {
    const answered: CallEvent = { type: "ANSWERED", by: "human", at: T0 }
    it("telephony events outside dialing", () => {
      const c = atConnected()
      for (const e of [
        answered,
        { type: "RINGING" },
        { type: "BUSY" },
        { type: "NO_ANSWER" },
        { type: "FAILED", reason: "x" },
      ] as CallEvent[]) {
        expect(c.can(e), e.type).toBe(false)
      }
      expect(start().can(answered)).toBe(false)
      expect(step(atDialing(), { type: "RINGING" }).snapshot.can({ type: "RINGING" })).toBe(false)
    })
    it("conversation events outside connected", () => {
      const d = atDialing()
      expect(d.can({ type: "TURN", speaker: "agent", text: "x", at: T0 })).toBe(false)
      expect(d.can({ type: "PROPOSE", action: "callback", valueMinor: null, rationale: "x" })).toBe(false)
      expect(d.can({ type: "CONVERSATION_ENDED", outcome: "x", at: T0 })).toBe(false)
    })
    it("a second PROPOSE while awaiting approval; decisions while talking", () => {
      const c = atConnected()
      const propose: CallEvent = { type: "PROPOSE", action: "callback", valueMinor: null, rationale: "x" }
      expect(c.can({ type: "APPROVAL_DECIDED", approvalId: 1, decision: "approved" })).toBe(false)
      expect(c.can({ type: "APPROVAL_CREATED", approvalId: 1 })).toBe(false)
      expect(step(c, propose).snapshot.can(propose)).toBe(false)
    })
    it("nothing once done", () => {
      const finished = step(atDialing(), { type: "BUSY" }, done("settle")).snapshot
      expect(finished.status).toBe("done")
      for (const e of [answered, { type: "CALLEE_HUNG_UP", at: T0 }] as CallEvent[]) {
        expect(finished.can(e), e.type).toBe(false)
      }
    })
  })
})

// ---------------------------------------------------------------------------------------------
// Layer 2 and 3: actors with stubbed effects, under a simulated clock
// ---------------------------------------------------------------------------------------------

interface Script {
  reserveFails?: boolean
  /** events placeCall sends, in order, once started */
  telephony?: TelephonyEvent[]
  /** events converse sends once started */
  conversation?: ConversationEvent[]
  /** events converse sends after it receives APPROVAL_DECIDED or APPROVAL_TIMEOUT */
  afterDecision?: ConversationEvent[]
  /** approval id the runtime creates for a proposal (sent back as APPROVAL_CREATED) */
  approvalId?: number
  /** settle rejects this many times first */
  settleFailures?: number
  hangUpAt?: number
}

interface Effects {
  reserved: ReserveFundsInput[]
  dialed: LineInput[]
  messages: LineInput[]
  conversed: ConverseInput[]
  toConverse: ConverseInboundEvent[]
  approvals: ApprovalRequest[]
  hungUp: HangUpInput[]
  settles: SettleInput[]
}

const later = (fn: () => void) => void Promise.resolve().then(fn)

function provideStubs(script: Script, fx: Effects) {
  let settleFailuresLeft = script.settleFailures ?? 0
  return callMachine.provide({
    actors: {
      reserveFunds: fromPromise<void, ReserveFundsInput>(async ({ input }) => {
        fx.reserved.push(input)
        if (script.reserveFails === true) throw new Error("INSUFFICIENT_FUNDS")
      }),
      placeCall: fromCallback<EventObject, LineInput>(({ input, sendBack }) => {
        fx.dialed.push(input)
        later(() => {
          for (const e of script.telephony ?? []) sendBack(e)
        })
        return () => {} // the provider leg is released by hangUp, not here
      }),
      leaveMessage: fromPromise<void, LineInput>(async ({ input }) => {
        fx.messages.push(input)
      }),
      converse: fromCallback<ConverseInboundEvent, ConverseInput>(({ input, sendBack, receive }) => {
        fx.conversed.push(input)
        later(() => {
          for (const e of script.conversation ?? []) sendBack(e)
        })
        receive((event) => {
          fx.toConverse.push(event)
          later(() => {
            for (const e of script.afterDecision ?? []) sendBack(e)
          })
        })
      }),
      hangUp: fromPromise<HangUpOutput, HangUpInput>(({ input }) => {
        fx.hungUp.push(input)
        return Promise.resolve({ at: script.hangUpAt ?? T0 + 999_000 })
      }),
      settle: fromPromise<void, SettleInput>(async ({ input }) => {
        fx.settles.push(input)
        if (settleFailuresLeft > 0) {
          settleFailuresLeft--
          throw new Error("db unavailable")
        }
      }),
    },
    actions: {
      requestApproval: ({ self }, params: ApprovalRequest) => {
        fx.approvals.push(params)
        if (script.approvalId !== undefined) {
          const approvalId = script.approvalId
          later(() => self.send({ type: "APPROVAL_CREATED", approvalId }))
        }
      },
    },
  })
}

function newEffects(): Effects {
  return {
    reserved: [],
    dialed: [],
    messages: [],
    conversed: [],
    toConverse: [],
    approvals: [],
    hungUp: [],
    settles: [],
  }
}

function launch(script: Script, over: Partial<CallInput> = {}) {
  const fx = newEffects()
  const clock = new SimulatedClock()
  const machine = provideStubs(script, fx)
  const actor = createActor(machine, { input: { ...input, ...over }, clock })
  actor.start()
  return { actor, fx, clock, machine }
}

type CallActor = ReturnType<typeof launch>["actor"]
const finished = async (actor: CallActor) =>
  (await waitFor(actor, (s) => s.status === "done", { timeout: 2_000 })).output
const reach = (actor: CallActor, value: Parameters<CallSnapshot["matches"]>[0]) =>
  waitFor(actor, (s) => s.matches(value), { timeout: 2_000 })
const flush = () => new Promise<void>((resolve) => setImmediate(resolve))

const human: TelephonyEvent[] = [{ type: "RINGING" }, { type: "ANSWERED", by: "human", at: T0 }]

describe("call machine: actors with stubbed effects", () => {
  it("happy call: reserve → ring → answer → turns → propose → approval decided → ends → hang up → settle", async () => {
    const { actor, fx } = launch({
      telephony: human,
      conversation: [
        { type: "TURN", speaker: "agent", text: "Hello", at: T0 + 1_000 },
        { type: "TURN", speaker: "callee", text: "Any discount?", at: T0 + 4_000 },
        { type: "PROPOSE", action: "concession", valueMinor: 1_000, rationale: "asked for a discount" },
      ],
      afterDecision: [
        { type: "TURN", speaker: "agent", text: "Approved: 10 off", at: T0 + 20_000 },
        { type: "CONVERSATION_ENDED", outcome: "interested", at: T0 + 64_500 },
      ],
      approvalId: 77,
    })
    await waitFor(actor, (s) => s.context.approvalId === 77, { timeout: 2_000 })
    expect(actor.getSnapshot().value).toEqual({ connected: "awaitingApproval" })
    actor.send({ type: "APPROVAL_DECIDED", approvalId: 77, decision: "approved" })

    expect(await finished(actor)).toEqual<CallOutput>({
      callId: 501,
      outcome: "interested",
      connectedSeconds: 65,
      answered: true,
      retryable: false,
      funded: true,
      settled: true,
      turns: 3,
    })
    expect(fx.reserved).toEqual([{ callId: 501, tenantId: 3, expectedSeconds: 180 }])
    expect(fx.dialed).toEqual([{ callId: 501, runId: 7, tenantId: 3, targetId: 90, phone: input.phone, attempt: 1 }])
    expect(fx.approvals.map((a) => a.proposal)).toEqual([
      { action: "concession", valueMinor: 1_000, rationale: "asked for a discount" },
    ])
    expect(fx.toConverse).toEqual([
      {
        type: "APPROVAL_DECIDED",
        approvalId: 77,
        decision: "approved",
        proposal: { action: "concession", valueMinor: 1_000, rationale: "asked for a discount" },
      },
    ])
    expect(fx.hungUp).toEqual([{ callId: 501, tenantId: 3 }])
    expect(fx.settles).toEqual([{ callId: 501, tenantId: 3, connectedSeconds: 65, outcome: "interested" }])
  })

  it("busy: settles without hanging up, retryable", async () => {
    const { actor, fx } = launch({ telephony: [{ type: "RINGING" }, { type: "BUSY" }] })
    expect(await finished(actor)).toMatchObject({
      outcome: "busy",
      answered: false,
      retryable: true,
      connectedSeconds: 0,
      settled: true,
    })
    expect(fx.hungUp).toEqual([])
    expect(fx.settles).toEqual([{ callId: 501, tenantId: 3, connectedSeconds: 0, outcome: "busy" }])
  })

  it("provider no-answer and failure", async () => {
    const a = launch({ telephony: [{ type: "NO_ANSWER" }] })
    expect(await finished(a.actor)).toMatchObject({ outcome: "no_answer", retryable: true })
    const b = launch({ telephony: [{ type: "FAILED", reason: "unreachable" }] })
    expect(await finished(b.actor)).toMatchObject({ outcome: "failed", retryable: true })
  })

  it("voicemail, leave the opening line", async () => {
    const { actor, fx } = launch(
      { telephony: [{ type: "ANSWERED", by: "machine", at: T0 }] },
      { voicemail: "leave_opening_line" },
    )
    expect(await finished(actor)).toMatchObject({
      outcome: "voicemail_left",
      answered: false,
      retryable: false,
      connectedSeconds: 0,
    })
    expect(fx.messages).toHaveLength(1)
    expect(fx.hungUp).toHaveLength(1)
    expect(fx.conversed).toEqual([])
  })

  it("voicemail, hang up", async () => {
    const { actor, fx } = launch({ telephony: [{ type: "ANSWERED", by: "machine", at: T0 }] }, { voicemail: "hang_up" })
    expect(await finished(actor)).toMatchObject({ outcome: "voicemail", retryable: false })
    expect(fx.messages).toEqual([])
    expect(fx.hungUp).toHaveLength(1)
  })

  it("insufficient funds: nothing dialed, nothing settled", async () => {
    const { actor, fx } = launch({ reserveFails: true, telephony: human })
    expect(await finished(actor)).toMatchObject({ outcome: "insufficient_funds", funded: false, retryable: false })
    expect(fx.dialed).toEqual([])
    expect(fx.settles).toEqual([])
  })

  it("settle fails twice, retries on the settleRetry backoff, then succeeds", async () => {
    const { actor, fx, clock } = launch({ telephony: [{ type: "BUSY" }], settleFailures: 2 })
    await reach(actor, { settling: "backoff" })
    clock.increment(999)
    await flush()
    expect(fx.settles).toHaveLength(1)
    clock.increment(1) // 1 s after the first failure
    await reach(actor, { settling: "backoff" })
    expect(fx.settles).toHaveLength(2)
    clock.increment(2_000) // 2 s after the second
    expect(await finished(actor)).toMatchObject({ outcome: "busy", settled: true })
    expect(fx.settles).toHaveLength(3)
  })

  it("settle gives up after 5 retries: settled false", async () => {
    const { actor, fx, clock } = launch({ telephony: [{ type: "BUSY" }], settleFailures: 100 })
    for (let i = 0; i < 5; i++) {
      await reach(actor, { settling: "backoff" })
      clock.increment(60_000)
    }
    expect(await finished(actor)).toMatchObject({ settled: false })
    expect(fx.settles).toHaveLength(6)
  })

  it("an actor the runtime forgot to provide fails loudly as a failed call", async () => {
    const clock = new SimulatedClock()
    const machine = callMachine.provide({
      actors: {
        reserveFunds: fromPromise<void, ReserveFundsInput>(async () => {}),
        hangUp: fromPromise<HangUpOutput, HangUpInput>(async () => ({ at: T0 })),
        settle: fromPromise<void, SettleInput>(async () => {}),
      },
    })
    const actor = createActor(machine, { input, clock }).start()
    const out = await finished(actor)
    expect(out).toMatchObject({ outcome: "failed" })
    expect(actor.getSnapshot().context.failureReason).toMatch(/placeCall.*not provided/)
  })
})

describe("call machine: timers under a simulated clock", () => {
  it("ring timeout: no answer within ringTimeoutMs → hang up → no_answer", async () => {
    const { actor, fx, clock } = launch({ telephony: [{ type: "RINGING" }] })
    await reach(actor, { dialing: "ringing" })
    clock.increment(input.ringTimeoutMs - 1)
    expect(actor.getSnapshot().value).toEqual({ dialing: "ringing" })
    clock.increment(1)
    expect(await finished(actor)).toMatchObject({
      outcome: "no_answer",
      retryable: true,
      answered: false,
      connectedSeconds: 0,
    })
    expect(fx.hungUp).toHaveLength(1)
  })

  it("ring timer is cancelled once answered", async () => {
    const { actor, clock } = launch({ telephony: human })
    await reach(actor, { connected: "talking" })
    clock.increment(input.ringTimeoutMs * 2)
    expect(actor.getSnapshot().value).toEqual({ connected: "talking" })
  })

  it("approval hold: no decision within approvalHoldMs → converse gets APPROVAL_TIMEOUT, back to talking", async () => {
    const { actor, fx, clock } = launch({
      telephony: human,
      conversation: [{ type: "PROPOSE", action: "callback", valueMinor: null, rationale: "call me Tuesday" }],
      approvalId: 12,
    })
    await waitFor(actor, (s) => s.context.approvalId === 12, { timeout: 2_000 })
    clock.increment(input.approvalHoldMs - 1)
    expect(actor.getSnapshot().value).toEqual({ connected: "awaitingApproval" })
    clock.increment(1)
    expect(actor.getSnapshot().value).toEqual({ connected: "talking" })
    expect(actor.getSnapshot().context).toMatchObject({ pendingProposal: null, approvalId: null })
    expect(fx.toConverse).toEqual([
      {
        type: "APPROVAL_TIMEOUT",
        approvalId: 12,
        proposal: { action: "callback", valueMinor: null, rationale: "call me Tuesday" },
      },
    ])
    // a late decision is refused
    expect(actor.getSnapshot().can({ type: "APPROVAL_DECIDED", approvalId: 12, decision: "approved" })).toBe(false)
  })

  it("a decision in time cancels the hold timer", async () => {
    const { actor, fx, clock } = launch({
      telephony: human,
      conversation: [{ type: "PROPOSE", action: "escalate", valueMinor: null, rationale: "wants a human" }],
      approvalId: 13,
    })
    await waitFor(actor, (s) => s.context.approvalId === 13, { timeout: 2_000 })
    clock.increment(5_000)
    actor.send({ type: "APPROVAL_DECIDED", approvalId: 13, decision: "denied" })
    clock.increment(input.approvalHoldMs)
    expect(fx.toConverse.map((e) => e.type)).toEqual(["APPROVAL_DECIDED"])
  })

  it("max duration: maxCallMs after answer → hang up, billed the cap", async () => {
    const { actor, fx, clock } = launch({
      telephony: human,
      conversation: [{ type: "TURN", speaker: "agent", text: "Hello", at: T0 + 500 }],
    })
    await reach(actor, { connected: "talking" })
    clock.increment(input.maxCallMs - 1)
    expect(actor.getSnapshot().matches("connected")).toBe(true)
    clock.increment(1)
    expect(await finished(actor)).toMatchObject({
      outcome: "max_duration",
      connectedSeconds: 300,
      answered: true,
      turns: 1,
      retryable: false,
    })
    expect(fx.hungUp).toHaveLength(1)
    expect(fx.settles[0]?.connectedSeconds).toBe(300)
  })
})

describe("call machine: a declined call end to end", () => {
  it("settles the seconds from answer to the conversation's end", async () => {
    const script: Script = {
      telephony: human,
      conversation: [
        { type: "TURN", speaker: "agent", text: "Hello", at: T0 + 1_000 },
        { type: "CONVERSATION_ENDED", outcome: "declined", at: T0 + 22_100 },
      ],
    }
    expect(await finished(launch(script).actor)).toEqual<CallOutput>({
      callId: 501,
      outcome: "declined",
      connectedSeconds: 23,
      answered: true,
      retryable: false,
      funded: true,
      settled: true,
      turns: 1,
    })
  })
})
