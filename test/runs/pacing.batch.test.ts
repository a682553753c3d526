// The runtime's pacing of wallet work: settlements are limited in flight (the grouping of
// reservations is the batch writer's: test/platform/batch-writer.test.ts).
import { describe, expect, it } from "vitest"
import { Limiter } from "../../src/dialing/pacing.js"

describe("Limiter", () => {
  it("never runs more than its maximum at once, and runs every task", async () => {
    const limiter = new Limiter(3)
    let active = 0
    let peak = 0
    const done: number[] = []
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        limiter.run(async () => {
          active++
          peak = Math.max(peak, active)
          await new Promise((r) => setTimeout(r, 1 + (i % 3)))
          active--
          done.push(i)
        }),
      ),
    )
    expect(peak).toBe(3)
    expect(done).toHaveLength(20)
    expect(limiter.queued).toBe(0)
  })

  it("gives the turn on when a task fails", async () => {
    const limiter = new Limiter(1)
    await expect(limiter.run(() => Promise.reject(new Error("no")))).rejects.toThrow("no")
    expect(await limiter.run(async () => 42)).toBe(42)
    expect(() => new Limiter(0)).toThrow(RangeError)
  })
})
