// The runtime's grouping of wallet work: reservations of calls starting together go in one batch
// per workspace (a batch in flight collects the next), and settlements are limited in flight.
import { describe, expect, it } from "vitest"
import { Limiter } from "../../runtime/pacing.js"
import { ReservationBatcher } from "../../runtime/reservations.js"

const tick = () => new Promise((r) => setTimeout(r, 5))

describe("ReservationBatcher", () => {
  it("reserves calls asked for together in one batch, and those asked for meanwhile in the next", async () => {
    const batches: string[][] = []
    let release: (() => void) | undefined
    const batcher = new ReservationBatcher(async (_tenant, refs) => {
      batches.push([...refs])
      if (batches.length === 1) await new Promise<void>((r) => (release = r))
      return refs.map((ref) => (ref === "call:3" ? { ok: false as const } : { ok: true as const, reservedMinor: 30 }))
    })
    const first = [1, 2].map((i) => batcher.reserve(7, `call:${i}`, 180))
    await tick()
    const second = [3, 4, 5].map((i) => batcher.reserve(7, `call:${i}`, 180))
    // Another workspace is never in the same batch.
    const other = batcher.reserve(8, "call:9", 180)
    await tick()
    expect(batches).toEqual([["call:1", "call:2"], ["call:9"]])
    release!()
    expect(await Promise.all(first)).toEqual([
      { ok: true, reservedMinor: 30 },
      { ok: true, reservedMinor: 30 },
    ])
    expect(await Promise.all(second)).toEqual([
      { ok: false },
      { ok: true, reservedMinor: 30 },
      { ok: true, reservedMinor: 30 },
    ])
    expect(await other).toEqual({ ok: true, reservedMinor: 30 })
    expect(batches).toEqual([["call:1", "call:2"], ["call:9"], ["call:3", "call:4", "call:5"]])
  })

  it("fails the calls of a batch whose write failed, and serves the next", async () => {
    let fail = true
    const batcher = new ReservationBatcher(async (_t, refs) => {
      if (fail) throw new Error("database away")
      return refs.map(() => ({ ok: true as const, reservedMinor: 1 }))
    })
    await expect(batcher.reserve(1, "call:1", 60)).rejects.toThrow("database away")
    fail = false
    expect(await batcher.reserve(1, "call:2", 60)).toEqual({ ok: true, reservedMinor: 1 })
  })
})

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
