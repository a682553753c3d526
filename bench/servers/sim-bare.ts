// bench/sim's baseline (run with --expose-gc): the same simulated conversations as a campaign's, as
// bare call actors: the call machine with the sim carrier, the sim model and the agent loop, and no
// runtime around them (no Postgres, bus, dialer, turn stream, approvals table or persistence).
//
//   node --expose-gc --import tsx bench/servers/sim-bare.ts     (commands over IPC)
import { createActor, fromCallback, fromPromise } from "xstate"
import {
  type ApprovalRequest,
  type CallOutput,
  type ConverseInboundEvent,
  callMachine,
  type HangUpInput,
  type HangUpOutput,
  type LineInput,
  type ReserveFundsInput,
  type SettleInput,
} from "../../machines/index.js"
import { converse } from "../../src/calls/conversation.js"
import type { DecisionStatus } from "../../src/providers/llm/llm.interface.js"
import { makeSimLlm } from "../../src/providers/llm/sim.llm.js"
import { makeSimTelephony } from "../../src/providers/telephony/sim.telephony.js"
import type { CallLeg } from "../../src/providers/telephony/telephony.interface.js"
import type { RuleBook } from "../../src/workflows/rulebook.schema.js"
import type { Heap } from "./dialer-host.js"

export type BareRequest =
  /** Runs `phones` in waves of `batch` conversations at a time; replies once all have ended. */
  | { id: number; cmd: "waves"; phones: string[]; batch: number }
  /** Starts `phones` (callees who ask for something); replies once every one holds for an answer. */
  | { id: number; cmd: "hold"; phones: string[] }
  /** Approves every held question; replies once their conversations have ended. */
  | { id: number; cmd: "answer" }
  | { id: number; cmd: "heap" }

interface Live {
  leg: CallLeg | undefined
  answeredAtMs: number | null
  turns: number
  pendingDecision: ((d: DecisionStatus) => void) | undefined
  holding: boolean
}

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("sim-bare needs node --expose-gc")
const heap = (): Heap => {
  const t0 = performance.now()
  gc!()
  gc!()
  const m = process.memoryUsage()
  return { heapUsed: m.heapUsed, rss: m.rss, external: m.external, gcMs: performance.now() - t0 }
}

const scale = Number(process.env.SIM_SCALE ?? 0.01)
const ruleBook = JSON.parse(process.env.SIM_RULE_BOOK ?? "null") as RuleBook
const telephony = makeSimTelephony({ timeScale: scale, holdProcess: true })
const llm = makeSimLlm()
const lives = new Map<number, Live>()
let nextCallId = 1
const held = new Map<
  number,
  { send: (e: { type: "APPROVAL_DECIDED"; approvalId: number; decision: "approved" }) => void }
>()
let onHolding: (() => void) | undefined

const machine = callMachine.provide({
  actors: {
    reserveFunds: fromPromise<void, ReserveFundsInput>(async () => {}),
    placeCall: fromCallback<{ type: string }, LineInput>(({ sendBack, input }) => {
      const live = lives.get(input.callId)!
      live.leg = telephony.dial({ callId: input.callId, to: input.phone, from: null, tenantId: 1 }, (e) => {
        if (e.type === "ANSWERED") {
          if (e.by === "human") live.answeredAtMs = e.at
          sendBack({ type: "ANSWERED", by: e.by, at: e.at })
        } else if (e.type === "FAILED") sendBack({ type: "FAILED", reason: e.reason })
        else if (e.type !== "HANGUP") sendBack({ type: e.type })
      })
      return () => {}
    }),
    converse: fromCallback<ConverseInboundEvent, LineInput>(({ sendBack, receive, input }) => {
      const live = lives.get(input.callId)!
      const stop = new AbortController()
      receive((e) => {
        const resolve = live.pendingDecision
        live.pendingDecision = undefined
        resolve?.(e.type === "APPROVAL_DECIDED" ? e.decision : "timeout")
      })
      void talk(live, stop.signal, "human", (e) => sendBack(e as never))
      return () => stop.abort()
    }),
    leaveMessage: fromPromise<void, LineInput>(async ({ input, signal }) => {
      await talk(lives.get(input.callId)!, signal, "machine", () => {})
    }),
    hangUp: fromPromise<HangUpOutput, HangUpInput>(async ({ input }) => {
      await lives
        .get(input.callId)
        ?.leg?.hangup()
        .catch(() => {})
      return { at: Date.now() }
    }),
    settle: fromPromise<void, SettleInput>(async () => {}),
  },
  actions: {
    // Raised at once, as the runtime raises its approval row: the question waits for "answer".
    requestApproval: (_, p: ApprovalRequest) => {
      const actor = actors.get(p.callId)
      const live = lives.get(p.callId)
      if (actor === undefined || live === undefined) return
      queueMicrotask(() => {
        actor.send({ type: "APPROVAL_CREATED", approvalId: p.callId })
        held.set(p.callId, { send: (e) => actor.send(e as never) })
        live.holding = true
        onHolding?.()
      })
    },
  },
  delays: {
    ringTimeout: 45_000 * scale,
    maxCall: ruleBook.max_call_seconds * 1000 * scale,
    approvalHold: 3_600_000,
  },
})
const actors = new Map<number, ReturnType<typeof createActor<typeof machine>>>()

async function talk(
  live: Live,
  signal: AbortSignal,
  answeredBy: "human" | "machine",
  sendBack: (e: { type: string; [k: string]: unknown }) => void,
): Promise<void> {
  if (live.leg === undefined) return sendBack({ type: "CALLEE_HUNG_UP", at: Date.now() })
  const result = await converse({
    leg: live.leg,
    llm,
    ruleBook,
    callee: { name: "Sim" },
    agentName: "Alex",
    company: "Bench",
    answeredBy,
    signal,
    onTurn: (turn) => {
      live.turns++
      sendBack({ type: "TURN", speaker: turn.speaker, text: turn.text, at: turn.at })
    },
    requestApproval: (p) =>
      new Promise<DecisionStatus>((resolve) => {
        live.pendingDecision = resolve
        sendBack({ type: "PROPOSE", action: p.action, valueMinor: p.value_minor, rationale: p.rationale })
      }),
  }).catch(() => ({ outcome: "agent_error" }))
  if (!signal.aborted) sendBack({ type: "CONVERSATION_ENDED", outcome: result.outcome, at: Date.now() })
}

/** One conversation from dial to hang-up; resolves with its outcome. */
function conversation(phone: string): Promise<string> {
  const callId = nextCallId++
  lives.set(callId, { leg: undefined, answeredAtMs: null, turns: 0, pendingDecision: undefined, holding: false })
  const actor = createActor(machine, {
    input: {
      callId,
      runId: 1,
      tenantId: 1,
      targetId: callId,
      phone,
      attempt: 1,
      expectedSeconds: ruleBook.max_call_seconds,
      maxCallMs: ruleBook.max_call_seconds * 1000 * scale,
      ringTimeoutMs: 45_000 * scale,
      approvalHoldMs: 3_600_000,
      voicemail: ruleBook.voicemail,
    },
  })
  actors.set(callId, actor)
  return new Promise((resolve) => {
    actor.subscribe({
      complete: () => {
        actors.delete(callId)
        lives.delete(callId)
        held.delete(callId)
        resolve((actor.getSnapshot().output as CallOutput | undefined)?.outcome ?? "failed")
      },
      error: () => resolve("failed"),
    })
    actor.start()
  })
}

let heldDone: Promise<string[]> | undefined

process.on("message", (raw) => {
  const m = raw as BareRequest
  const reply = (body: Record<string, unknown>) => process.send!({ type: "reply", id: m.id, ...body })
  switch (m.cmd) {
    case "heap":
      return reply({ heap: heap(), live: actors.size })
    case "waves":
      return void (async () => {
        const outcomes: Record<string, number> = {}
        const t0 = performance.now()
        for (let i = 0; i < m.phones.length; i += m.batch) {
          const wave = await Promise.all(m.phones.slice(i, i + m.batch).map(conversation))
          for (const o of wave) outcomes[o] = (outcomes[o] ?? 0) + 1
        }
        reply({ ms: performance.now() - t0, outcomes })
      })()
    case "hold": {
      let holding = 0
      onHolding = () => {
        if (++holding === m.phones.length) {
          onHolding = undefined
          reply({ holding })
        }
      }
      heldDone = Promise.all(m.phones.map(conversation))
      return
    }
    case "answer": {
      const t0 = performance.now()
      for (const [approvalId, h] of held) h.send({ type: "APPROVAL_DECIDED", approvalId, decision: "approved" })
      return void heldDone?.then((outcomes) => reply({ ms: performance.now() - t0, outcomes }))
    }
  }
})
process.send!({ type: "ready" })
