// The speech simulator's workers (~100 MB each) stop after idleMs without a job, and the next
// synthesis starts one again with the same result: an idle server does not keep a warm engine.
import { readdirSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { makeSimSpeech } from "../../src/providers/speech/sim.speech.js"
import type { SpeechVoice } from "../../src/providers/speech/speech.interface.js"

const voice: SpeechVoice = { language: "en-GB", gender: "female", pitch: 0, speed: 1, variant: 0 }
const speech = makeSimSpeech({ workers: 1, idleMs: 300 })
afterAll(() => speech.close())

/** Threads of this process (Linux /proc), the speech workers among them. */
const threads = (): number => readdirSync("/proc/self/task").length

describe("sim speech worker pool", () => {
  it("stops an idle worker and starts a fresh one for the next job, with the same clip", async () => {
    const before = threads()
    const first = await speech.synthesize({ text: "Your renewal is due next week.", voice })
    const busy = threads()
    expect(busy).toBeGreaterThan(before)
    // Idle past idleMs: the worker's thread is gone.
    await expect.poll(threads, { timeout: 10_000, interval: 100 }).toBeLessThan(busy)
    const second = await speech.synthesize({ text: "Your renewal is due next week.", voice })
    expect(Buffer.from(second.audio).equals(Buffer.from(first.audio))).toBe(true)
    expect(second.duration_ms).toBe(first.duration_ms)
  }, 60_000)

  it.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31])("refuses idleMs %s", (idleMs) => {
    expect(() => makeSimSpeech({ idleMs })).toThrow(RangeError)
  })
})
