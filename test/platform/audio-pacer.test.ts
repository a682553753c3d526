// The audio pacer: frames handed out at 20 ms of real time each, or at a simulated call's time
// scale (0.01: a hundred times as many), in batches per wake-up, and no more than fell due. The
// clock and the timer are the test's (fake timers), so a loaded machine cannot stretch a wake-up.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { Pacer } from "../../src/platform/pacer.js"

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

/** A paced call that counts what it was handed: each wake-up's batch, in order. */
function counted(pacer: Pacer): number[] {
  const batches: number[] = []
  pacer.add({
    tick(due) {
      batches.push(due)
      return true
    },
  })
  return batches
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0)

describe("the audio pacer", () => {
  it("hands out a frame every 20 ms at real time", () => {
    const pacer = new Pacer({ now: () => Date.now() })
    const batches = counted(pacer)
    vi.advanceTimersByTime(400)
    pacer.stop()
    // The first at once, then one a wake-up: 400 ms of audio.
    expect(batches).toEqual(Array(21).fill(1))
  })

  it("at a time scale of 0.01 hands out a hundred times as many, batched per wake-up", () => {
    const pacer = new Pacer({ timeScale: 0.01, now: () => Date.now() })
    const batches = counted(pacer)
    vi.advanceTimersByTime(400)
    pacer.stop()
    // 400 ms is 40 s of audio at a hundred times real time: 2,000 frames, 100 a wake-up.
    expect(sum(batches.slice(1))).toBe(2000)
    expect(batches.slice(1).every((b) => b === 100)).toBe(true)
  })

  it("catches up a late wake-up by at most 100 ms of audio, then keeps its pace from there", () => {
    let now = 0
    const pacer = new Pacer({ now: () => now })
    const batches = counted(pacer)
    // The loop was busy for a second: the next wake-up finds 50 frames due.
    now = 1000
    vi.advanceTimersByTime(20)
    expect(batches.at(-1)).toBe(5)
    // From there, one a wake-up again (no burst to make up the rest).
    for (let i = 0; i < 5; i++) {
      now += 20
      vi.advanceTimersByTime(20)
    }
    pacer.stop()
    expect(batches.slice(-5)).toEqual([1, 1, 1, 1, 1])
  })
})
