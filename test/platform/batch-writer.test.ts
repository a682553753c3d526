// The one batch writer (src/platform/batch-writer.ts) that reservations, settlements, attempt endings,
// webhook attempts and turns are written through: per key one write in flight, what arrives
// meanwhile in the next; a refused group split so one bad item fails alone; items kept and written
// again while Postgres is out of reach.
import { describe, expect, it } from "vitest"
import { BatchWriter } from "../../src/platform/batch-writer.js"

const tick = () => new Promise((r) => setTimeout(r, 5))
const away = () => Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" })

describe("BatchWriter", () => {
  it("writes what is asked for together in one group per key, and what arrives meanwhile in the next", async () => {
    // The runtime's call reservations: keyed by workspace and terms.
    const groups: Array<[string, string[]]> = []
    let release: (() => void) | undefined
    const w = new BatchWriter<string, string, number>(
      async (key, refs) => {
        groups.push([key, [...refs]])
        if (groups.length === 1) await new Promise<void>((r) => (release = r))
        return refs.map((ref) => Number(ref.slice(5)) * 10)
      },
      { maxBatch: 500 },
    )
    const first = [1, 2].map((i) => w.submit("7:180", `call:${i}`))
    await tick()
    const second = [3, 4, 5].map((i) => w.submit("7:180", `call:${i}`))
    // Another key is never in the same group, and does not wait for the first key's write.
    const other = w.submit("8:180", "call:9")
    await tick()
    expect(groups).toEqual([
      ["7:180", ["call:1", "call:2"]],
      ["8:180", ["call:9"]],
    ])
    expect(w.pending).toBe(3)
    release!()
    expect(await Promise.all([...first, ...second])).toEqual([10, 20, 30, 40, 50])
    expect(await other).toBe(90)
    expect(groups.at(-1)).toEqual(["7:180", ["call:3", "call:4", "call:5"]])
    expect(w.pending).toBe(0)
  })

  it("caps a group's size", async () => {
    const sizes: number[] = []
    const w = new BatchWriter<"k", number, number>(
      async (_, items) => {
        sizes.push(items.length)
        return items
      },
      { maxBatch: 4 },
    )
    expect(await Promise.all(Array.from({ length: 10 }, (_, i) => w.submit("k", i)))).toEqual([
      0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
    ])
    expect(sizes).toEqual([4, 4, 2])
  })

  it("starts after the loop turn's I/O when asked to, so a whole turn's items share the first write", async () => {
    const groupsOf = async (start: "microtask" | "immediate") => {
      const groups: number[][] = []
      const w = new BatchWriter<"k", number, number>(
        async (_, items) => {
          groups.push([...items])
          return items
        },
        { maxBatch: 100, start },
      )
      const a = w.submit("k", 1)
      // Later in the same loop turn (as a second request read in this turn would be).
      for (let i = 0; i < 3; i++) await Promise.resolve()
      const b = w.submit("k", 2)
      await Promise.all([a, b])
      return groups
    }
    expect(await groupsOf("microtask")).toEqual([[1], [2]])
    expect(await groupsOf("immediate")).toEqual([[1, 2]])
  })

  it("fails every item of a refused group unless asked to split it; split, only the bad item fails", async () => {
    const write = async (_: "k", items: readonly number[]) => {
      if (items.includes(13)) throw new Error("bad item")
      return items.map((i) => i + 1)
    }
    const whole = new BatchWriter(write, { maxBatch: 10 })
    const all = await Promise.allSettled([1, 13, 2].map((i) => whole.submit("k", i)))
    expect(all.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected"])
    // The key serves the next group after a failure.
    expect(await whole.submit("k", 5)).toBe(6)

    const split = new BatchWriter(write, { maxBatch: 10, splitRefused: true })
    const out = await Promise.allSettled([1, 13, 2].map((i) => split.submit("k", i)))
    expect(out.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"])
    expect(out[0]).toMatchObject({ value: 2 })
  })

  it("does not split a group failed for Postgres out of reach (one by one would only wait longer)", async () => {
    let writes = 0
    const w = new BatchWriter<"k", number, number>(
      async () => {
        writes++
        throw away()
      },
      { maxBatch: 10, splitRefused: true },
    )
    const out = await Promise.allSettled([1, 2, 3].map((i) => w.submit("k", i)))
    expect(out.every((o) => o.status === "rejected")).toBe(true)
    expect(writes).toBe(1)
  })

  it("keeps the items it is told to keep while Postgres is away, in order, and fails the others at once", async () => {
    const written: number[][] = []
    const failures: Array<{ kept: number; failures: number }> = []
    let down = 2
    const w = new BatchWriter<"run", { n: number; keep: boolean }, number>(
      async (_, items) => {
        if (down-- > 0) throw away()
        written.push(items.map((i) => i.n))
        return items.map((i) => i.n)
      },
      {
        maxBatch: 10,
        keep: (i) => i.keep,
        onFailure: (_err, info) => failures.push({ kept: info.kept, failures: info.failures }),
      },
    )
    const kept = [1, 2, 3].map((n) => w.submit("run", { n, keep: true }))
    const ingested = w.submit("run", { n: 4, keep: false })
    await expect(ingested).rejects.toMatchObject({ code: "ECONNREFUSED" })
    expect(await Promise.all(kept)).toEqual([1, 2, 3])
    expect(written).toEqual([[1, 2, 3]])
    expect(failures).toEqual([
      { kept: 3, failures: 1 },
      { kept: 3, failures: 2 },
    ])
  })

  it("flush resolves once everything submitted so far is written", async () => {
    let release: (() => void) | undefined
    const w = new BatchWriter<"k", number, number>(
      async (_, items) => {
        await new Promise<void>((r) => (release = r))
        return items
      },
      { maxBatch: 10 },
    )
    await w.flush()
    const p = w.submit("k", 1)
    let flushed = false
    const f = w.flush().then(() => (flushed = true))
    await tick()
    expect(flushed).toBe(false)
    release!()
    await Promise.all([p, f])
    expect(flushed).toBe(true)
  })
})
