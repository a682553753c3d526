// The telephony simulator: carrier events by the number's last digit, asynchronous delivery, leg
// life cycle (say/listen/hangup), deterministic timing scaled by timeScale, scale, and its layers.
import { Effect, Layer } from "effect"
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { AppConfig } from "../../src/platform/AppConfig.js"
import { loadConfig } from "../../src/platform/config.js"
import { Telephony, TelephonyLive } from "../../src/providers/Telephony.js"
import { makeSimTelephony, simCalleeFor, simRingMs } from "../../src/providers/telephony/sim.telephony.js"
import {
  type CallLeg,
  type CarrierEvent,
  TelephonyError,
  type TelephonyProvider,
} from "../../src/providers/telephony/telephony.interface.js"
import { stopSharedServers } from "../support/harness.js"

// No shared server runs beside this suite: it fakes the process's timers, which would be theirs too.
beforeAll(stopSharedServers)

const TERMINAL = new Set(["BUSY", "NO_ANSWER", "FAILED", "HANGUP"])

interface Dialed {
  leg: CallLeg
  events: CarrierEvent[]
  /** Resolves with who answered, or null when the call ended unanswered. */
  answered: Promise<"human" | "machine" | null>
  /** Resolves with the terminal event. */
  ended: Promise<CarrierEvent>
}

function dial(tel: TelephonyProvider, to: string, callId = 1): Dialed {
  const events: CarrierEvent[] = []
  let answer!: (by: "human" | "machine" | null) => void
  let finish!: (e: CarrierEvent) => void
  const answered = new Promise<"human" | "machine" | null>((r) => (answer = r))
  const ended = new Promise<CarrierEvent>((r) => (finish = r))
  const leg = tel.dial({ callId, to, from: null, tenantId: 1 }, (e) => {
    events.push(e)
    if (e.type === "ANSWERED") answer(e.by)
    if (TERMINAL.has(e.type)) {
      answer(null)
      finish(e)
    }
  })
  return { leg, events, answered, ended }
}

const types = (events: CarrierEvent[]) =>
  events.map((e) => (e.type === "ANSWERED" || e.type === "HANGUP" ? `${e.type}:${e.by}` : e.type))

afterEach(() => {
  vi.useRealTimers()
})

describe("sim telephony: carrier events by last digit", () => {
  it.each([
    [0, ["RINGING", "NO_ANSWER"]],
    [1, ["BUSY"]],
    [2, ["RINGING", "ANSWERED:machine", "HANGUP:agent"]],
    [3, ["RINGING", "ANSWERED:human", "HANGUP:agent"]],
    [4, ["RINGING", "ANSWERED:human", "HANGUP:agent"]],
    [5, ["RINGING", "ANSWERED:human", "HANGUP:agent"]],
    [6, ["RINGING", "ANSWERED:human", "HANGUP:agent"]],
    [7, ["RINGING", "ANSWERED:human", "HANGUP:agent"]],
    [8, ["RINGING", "ANSWERED:human", "HANGUP:agent"]],
    [9, ["RINGING", "ANSWERED:human", "HANGUP:agent"]],
  ])("digit %i", async (digit, expected) => {
    const tel = makeSimTelephony({ timeScale: 0.001 })
    const d = dial(tel, `+1 (415) 555-010${digit}`)
    expect(tel.activeLegs).toBe(1)
    const by = await d.answered
    if (by !== null) await d.leg.hangup()
    await d.ended
    expect(types(d.events)).toEqual(expected)
    expect(tel.activeLegs).toBe(0)
    for (let i = 1; i < d.events.length; i++) expect(d.events[i]!.at).toBeGreaterThanOrEqual(d.events[i - 1]!.at)
  })

  it("names the behaviour of each digit", () => {
    expect(Array.from({ length: 10 }, (_, i) => simCalleeFor(`+91987654321${i}`))).toEqual([
      "no_answer",
      "busy",
      "voicemail",
      "agrees",
      "agrees",
      "agrees",
      "declines",
      "wants_discount",
      "wants_callback",
      "wants_human",
    ])
    expect(simCalleeFor("unknown")).toBeUndefined()
  })

  it("fails a number without digits", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    const d = dial(tel, "not-a-number")
    const e = await d.ended
    expect(e).toMatchObject({ type: "FAILED", reason: expect.stringContaining("invalid number") })
    expect(tel.activeLegs).toBe(0)
  })

  it("delivers events asynchronously, never from inside dial", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    for (const digit of [0, 1, 3]) {
      const d = dial(tel, `+1415555010${digit}`)
      expect(d.events).toEqual([])
      await d.answered
      await d.leg.hangup()
    }
  })
})

describe("sim telephony: the leg", () => {
  it("speaks at about 2.6 words per second, scaled, and reports the duration", async () => {
    const words = (n: number) => Array.from({ length: n }, () => "word").join(" ")
    const at = async (timeScale: number, n: number) => {
      const tel = makeSimTelephony({ timeScale })
      const d = dial(tel, "+14155550103")
      await d.answered
      const r = await d.leg.say(words(n))
      await d.leg.hangup()
      return r.durationMs
    }
    expect(await at(0.01, 13)).toBe(50)
    expect(await at(0.01, 26)).toBe(100)
    expect(await at(0, 26)).toBe(0)
  })

  it("answers with the callee's lines, then null once they hang up", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    const d = dial(tel, "+14155550106")
    await d.answered
    const first = await d.leg.listen()
    expect(first?.text).toMatch(/need this/)
    // The agent says goodbye without hanging up: the callee puts the phone down.
    await d.leg.say("Thank you for your time, goodbye.")
    expect(await d.leg.listen()).toBeNull()
    expect(types(d.events)).toEqual(["RINGING", "ANSWERED:human", "HANGUP:callee"])
    expect(tel.activeLegs).toBe(0)
    // The leg is gone: say rejects, listen resolves null, hangup is a no-op.
    await expect(d.leg.say("Hello?")).rejects.toBeInstanceOf(TelephonyError)
    expect(await d.leg.listen()).toBeNull()
    await d.leg.hangup()
    expect(d.events).toHaveLength(3)
  })

  it("hangs up on an agent who never gets anywhere", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    const d = dial(tel, "+14155550103")
    await d.answered
    let lines = 0
    while ((await d.leg.listen()) !== null) {
      lines++
      await d.leg.say("Hmm.")
    }
    expect(lines).toBe(12)
    expect(types(d.events).at(-1)).toBe("HANGUP:callee")
  })

  it("holds a say or listen asked for while ringing until the answer", async () => {
    const tel = makeSimTelephony({ timeScale: 0.001 })
    const d = dial(tel, "+14155550104")
    const heard = d.leg.listen()
    expect(await heard).toMatchObject({ text: expect.any(String) })
    expect(types(d.events)).toEqual(["RINGING", "ANSWERED:human"])
    await d.leg.hangup()
  })

  it("refuses a second operation while one is in flight, and settles both on hangup", async () => {
    const tel = makeSimTelephony({ timeScale: 1 })
    const d = dial(tel, "+14155550103")
    const listening = d.leg.listen()
    await expect(d.leg.say("Hello")).rejects.toThrow(/in progress/)
    await d.leg.hangup()
    expect(await listening).toBeNull()
    expect(types(d.events)).toEqual(["HANGUP:agent"])
    expect(tel.activeLegs).toBe(0)

    const d2 = dial(tel, "+14155550103")
    const speaking = d2.leg.say("Hello there")
    await d2.leg.hangup()
    await expect(speaking).rejects.toBeInstanceOf(TelephonyError)
  })

  it("rejects a negative or non-finite time scale", () => {
    expect(() => makeSimTelephony({ timeScale: -1 })).toThrow(RangeError)
    expect(() => makeSimTelephony({ timeScale: Number.NaN })).toThrow(RangeError)
  })
})

describe("sim telephony: timing", () => {
  it("rings 3-8 s at scale 1, fixed per number, and scales the ring", async () => {
    vi.useFakeTimers()
    const ring = async (timeScale: number, to: string) => {
      const tel = makeSimTelephony({ timeScale })
      const d = dial(tel, to)
      await vi.runAllTimersAsync()
      await d.answered
      await d.leg.hangup()
      const [ringing, answered] = d.events
      return answered!.at - ringing!.at
    }
    const numbers = Array.from({ length: 20 }, (_, i) => `+9198765${String(i).padStart(4, "0")}3`)
    const rings = numbers.map((n) => simRingMs(n))
    for (const ms of rings) {
      expect(ms).toBeGreaterThanOrEqual(3_000)
      expect(ms).toBeLessThanOrEqual(8_000)
    }
    expect(new Set(rings).size).toBeGreaterThan(5)
    expect(await ring(1, numbers[0]!)).toBe(rings[0])
    expect(await ring(1, numbers[0]!)).toBe(rings[0])
    expect(await ring(0.01, numbers[0]!)).toBe(Math.round(rings[0]! * 0.01))
    // No answer: the same ring, then NO_ANSWER.
    const tel = makeSimTelephony({ timeScale: 1 })
    const d = dial(tel, "+14155550100")
    await vi.runAllTimersAsync()
    expect(d.events[1]!.at - d.events[0]!.at).toBe(simRingMs("+14155550100"))
  })

  it("takes 1.5-4 s per callee utterance at scale 1", async () => {
    vi.useFakeTimers()
    const tel = makeSimTelephony({ timeScale: 1 })
    const d = dial(tel, "+14155550103")
    await vi.runAllTimersAsync()
    await d.answered
    for (let i = 0; i < 5; i++) {
      const started = Date.now()
      const heard = d.leg.listen()
      await vi.runAllTimersAsync()
      expect(await heard).not.toBeNull()
      const took = Date.now() - started
      expect(took).toBeGreaterThanOrEqual(1_500)
      expect(took).toBeLessThanOrEqual(4_000)
      const saying = d.leg.say("Tell me more?")
      await vi.runAllTimersAsync()
      await saying
    }
    await d.leg.hangup()
  })

  it("runs at scale 0 on setImmediate, without timers of 1 ms", async () => {
    const spy = vi.spyOn(globalThis, "setTimeout")
    const tel = makeSimTelephony({ timeScale: 0 })
    const d = dial(tel, "+14155550105")
    await d.answered
    await d.leg.listen()
    await d.leg.say("Shall we go ahead?")
    await d.leg.listen()
    await d.leg.hangup()
    expect(spy).not.toHaveBeenCalled()
    spy.mockRestore()
  })
})

describe("sim telephony: scale", () => {
  it("carries 1,000 concurrent legs at scale 0 and ends them all", async () => {
    const tel = makeSimTelephony({ timeScale: 0 })
    const calls = Array.from({ length: 1_000 }, (_, i) => dial(tel, `+9199${String(i).padStart(8, "0")}`, i))
    expect(tel.activeLegs).toBe(1_000)
    const providerIds = new Set(calls.map((c) => c.leg.providerCallId))
    expect(providerIds.size).toBe(1_000)
    await Promise.all(
      calls.map(async (c) => {
        if ((await c.answered) === null) return
        await c.leg.listen()
        await c.leg.say("Thank you, goodbye.")
        await c.leg.hangup()
      }),
    )
    await Promise.all(calls.map((c) => c.ended))
    expect(tel.activeLegs).toBe(0)
  })
})

describe("Telephony service", () => {
  const provider = (layer: Layer.Layer<Telephony>) => Effect.runSync(Effect.provide(Telephony, layer))

  it("gives the simulator at the configured time scale", async () => {
    expect(provider(Telephony.sim(0.01)).name).toBe("sim")
    vi.useFakeTimers()
    const live = provider(TelephonyLive.pipe(Layer.provide(AppConfig.layer(loadConfig({ SIM_TIME_SCALE: "0.5" })))))
    expect(live.name).toBe("sim")
    const d = dial(live, "+14155550103")
    await vi.runAllTimersAsync()
    expect(d.events[1]!.at - d.events[0]!.at).toBe(Math.round(simRingMs("+14155550103") * 0.5))
    await d.leg.hangup()
  })

  it("parses SIM_TIME_SCALE and CALLING_HOURS", () => {
    expect(loadConfig({})).toMatchObject({ simTimeScale: 1, callingHoursAny: false })
    expect(loadConfig({ SIM_TIME_SCALE: "0.01", CALLING_HOURS: "any" })).toMatchObject({
      simTimeScale: 0.01,
      callingHoursAny: true,
    })
    expect(loadConfig({ SIM_TIME_SCALE: "0" }).simTimeScale).toBe(0)
    expect(loadConfig({ SIM_TIME_SCALE: "" }).simTimeScale).toBe(1)
    expect(() => loadConfig({ SIM_TIME_SCALE: "-1" })).toThrow(/SIM_TIME_SCALE/)
    expect(() => loadConfig({ SIM_TIME_SCALE: "fast" })).toThrow(/SIM_TIME_SCALE/)
    expect(() => loadConfig({ CALLING_HOURS: "9-17" })).toThrow(/CALLING_HOURS/)
  })
})
