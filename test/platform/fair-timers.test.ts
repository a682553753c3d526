// Fair timers: callbacks run in due order (then in the order they were set), cancelled ones never
// run, and a burst due at once runs in slices with the event loop's own timers and I/O in between.
import { describe, expect, it } from "vitest"
import { FairTimers } from "../../src/platform/fair-timers.js"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe("FairTimers", () => {
  it("runs callbacks by due time, then in the order they were set, each once", async () => {
    const timers = new FairTimers()
    const ran: string[] = []
    timers.setTimeout((x: string) => ran.push(x), 30, true, "c")
    timers.setTimeout((x: string) => ran.push(x), 5, true, "a")
    timers.setTimeout((x: string) => ran.push(x), 5, true, "b")
    timers.setTimeout(() => ran.push("d"), 0)
    await sleep(60)
    expect(ran).toEqual(["d", "a", "b", "c"])
    expect(timers.size).toBe(0)
  })

  it("never runs a cancelled callback, and forgets many cancelled ones", async () => {
    const timers = new FairTimers()
    let ran = 0
    const kept = timers.setTimeout(() => ran++, 20)
    const many = Array.from({ length: 5000 }, () => timers.setTimeout(() => (ran += 1000), 10))
    for (const t of many) timers.clearTimeout(t)
    expect(timers.size).toBe(1)
    timers.clearTimeout(many[0]) // twice is harmless
    await sleep(50)
    expect(ran).toBe(1)
    timers.clearTimeout(kept) // after it ran: harmless
    expect(timers.size).toBe(0)
  })

  it("lets the loop's own timers run between slices of a burst due at once", async () => {
    const timers = new FairTimers()
    const order: string[] = []
    // 300 callbacks of ~1 ms each, all due together: about 75 slices of 4 ms.
    for (let i = 0; i < 300; i++)
      timers.setTimeout(() => {
        const end = performance.now() + 1
        while (performance.now() < end);
        order.push("burst")
      }, 5)
    // A 1 ms interval of the loop's own, as an event-loop delay monitor has.
    let gaps = 0
    const tick = setInterval(() => {
      gaps++
      order.push("tick")
    }, 1)
    while (order.filter((x) => x === "burst").length < 300) await sleep(10)
    clearInterval(tick)
    // The loop's timer ran in the middle of the burst, not only around it.
    const first = order.indexOf("burst")
    const lastBurst = order.lastIndexOf("burst")
    const inside = order.slice(first, lastBurst).filter((x) => x === "tick").length
    expect(inside).toBeGreaterThan(10)
    expect(gaps).toBeGreaterThan(10)
    // Nowhere near a single pass over the burst: at most one slice (16 callbacks) between two of the
    // loop's ticks, counted rather than timed (a loaded machine stretches every slice's wall time).
    let run = 0
    let longest = 0
    for (const x of order.slice(first, lastBurst + 1)) {
      run = x === "burst" ? run + 1 : 0
      longest = Math.max(longest, run)
    }
    expect(longest).toBeLessThanOrEqual(16)
  })

  it("holds the process only while a ref'd callback waits", () => {
    const timers = new FairTimers()
    const held = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length
    const before = held()
    const quiet = timers.setTimeout(() => {}, 10_000, false)
    expect(held()).toBe(before)
    const loud = timers.setTimeout(() => {}, 20_000)
    expect(held()).toBe(before + 1)
    timers.clearTimeout(loud)
    expect(held()).toBe(before)
    timers.clearTimeout(quiet)
  })
})
