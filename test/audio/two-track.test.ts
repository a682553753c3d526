import { describe, expect, it } from "vitest"
import { decode, encodeSample, FRAME_SAMPLES, mix } from "../../src/providers/audio/g711.js"
import { TwoTrack, ULAW_SILENCE } from "../../src/providers/audio/two-track.js"

const frame = (byte: number, n = 1) => new Uint8Array(n * FRAME_SAMPLES).fill(byte)
const slotBytes = (bytes: Uint8Array, slot: number) => bytes[slot * FRAME_SAMPLES]

describe("two sides of a call on one clock", () => {
  it("places each side's frames at the slots they arrived in, silence where a side sent none", () => {
    let t = 0
    const tracks = new TwoTrack({ now: () => t, lagMs: 40 })
    t = 20 // slot 1
    tracks.push("callee", frame(1))
    t = 60 // slot 3: a batch of two ends now, at slots 2 and 3
    tracks.push("agent", frame(2, 2))
    expect(tracks.take()).toMatchObject({ from: 0, count: 1 }) // slots before 3 - 2 are due
    t = 200
    const got = tracks.take()!
    expect(got.from).toBe(1)
    expect(slotBytes(got.callee, 0)).toBe(1)
    expect(slotBytes(got.callee, 1)).toBe(ULAW_SILENCE)
    expect([slotBytes(got.agent, 0), slotBytes(got.agent, 1), slotBytes(got.agent, 2)]).toEqual([ULAW_SILENCE, 2, 2])
    expect(tracks.take()).toBeUndefined()
  })

  it("never places a side's frames over what it already placed (a burst follows on)", () => {
    const t = 100
    const tracks = new TwoTrack({ now: () => t })
    tracks.push("agent", frame(3, 5))
    tracks.push("agent", frame(4, 2)) // same moment: after the first five
    const all = tracks.takeAll()!
    expect(all.count).toBe(7)
    expect(slotBytes(all.agent, 0)).toBe(3)
    expect(slotBytes(all.agent, 5)).toBe(4)
    expect(slotBytes(all.agent, 6)).toBe(4)
    expect(slotBytes(all.callee, 6)).toBe(ULAW_SILENCE)
  })

  it("is bounded: a side far ahead of the clock loses what would overrun its ring", () => {
    const t = 0
    const tracks = new TwoTrack({ now: () => t, lagMs: 100 })
    tracks.push("agent", frame(5, 10_000))
    expect(tracks.dropped).toBeGreaterThan(9_000)
    expect(tracks.takeAll()!.count).toBeLessThan(1_000)
  })

  it("takes a simulated call's clock from its time scale", () => {
    let t = 0
    const tracks = new TwoTrack({ now: () => t, frameMs: 0.2, lagMs: 10 })
    t = 20 // 100 slots of a call at a hundredth of real time
    tracks.push("callee", frame(6, 100))
    t = 40
    const got = tracks.take()!
    expect(got.count).toBe(150)
    expect(slotBytes(got.callee, 99)).toBe(6)
  })
})

describe("mixing μ-law", () => {
  it("sums the two sides, and passes one side through where the other is silent", () => {
    const a = new Uint8Array([encodeSample(1000), ULAW_SILENCE, encodeSample(30_000)])
    const b = new Uint8Array([encodeSample(-400), encodeSample(500), encodeSample(30_000)])
    const pcm = decode(mix(a, b))
    expect(Math.abs(pcm[0]! - 600)).toBeLessThan(40)
    expect(mix(a, b)[1]).toBe(b[1])
    expect(pcm[2]).toBeGreaterThan(32_000) // clipped, not wrapped
  })
})
