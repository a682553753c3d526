// The audio pacer: frames handed out at 20 ms of real time each, or at a simulated call's time
// scale (0.01: a hundred times as many), in batches per wake-up, and no more than fell due.
import { describe, expect, it } from "vitest"
import { Pacer } from "../../src/platform/pacer.js"

/** Frames handed to one paced call over `ms` of real time, and the largest batch. */
async function paced(pacer: Pacer, ms: number): Promise<{ frames: number; largest: number; elapsed: number }> {
  const t0 = performance.now()
  let frames = 0
  let largest = 0
  pacer.add({
    tick(due) {
      frames += due
      largest = Math.max(largest, due)
      return true
    },
  })
  await new Promise((r) => setTimeout(r, ms))
  pacer.stop()
  return { frames, largest, elapsed: performance.now() - t0 }
}

describe("the audio pacer", () => {
  it("hands out a frame every 20 ms at real time", async () => {
    const { frames, largest, elapsed } = await paced(new Pacer(), 400)
    expect(Math.abs(frames - elapsed / 20)).toBeLessThanOrEqual(3)
    expect(largest).toBeLessThanOrEqual(5)
  })

  it("at a time scale of 0.01 hands out a hundred times as many, batched per wake-up", async () => {
    const { frames, largest, elapsed } = await paced(new Pacer({ timeScale: 0.01 }), 400)
    expect(frames).toBeGreaterThanOrEqual(elapsed / 0.2 - 300)
    expect(frames).toBeLessThanOrEqual(elapsed / 0.2 + 300)
    expect(largest).toBeGreaterThanOrEqual(50)
  })
})
