// Call recordings (src/providers/audio/recording-encoder.ts, ogg-opus.ts): real speech on each side
// at known slots, encoded on the worker thread, read back page by page and decoded with libopus.
import { parseBuffer } from "music-metadata"
import OpusScript from "opusscript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { decode, FRAME_SAMPLES, PHONE_RATE } from "../../src/providers/audio/g711.js"
import {
  oggCrc,
  oggOpusDurationMs,
  oggPage,
  parseOpusHead,
  readOggPackets,
} from "../../src/providers/audio/ogg-opus.js"
import {
  makeRecordingEncoder,
  type RecordingEncoder,
  RecordingEncoderBusy,
  type RecordingParts,
  recordingWorkerOf,
} from "../../src/providers/audio/recording-encoder.js"
import { TakeEncoder } from "../../src/providers/audio/recording-encoder.worker.js"
import type { TrackSlots } from "../../src/providers/audio/two-track.js"
import { speakForPhone } from "../../src/providers/speech/flite.phone.js"

/** Ogg's CRC bit by bit, straight from RFC 3533's description: the reference for the table-driven one. */
function bitwiseCrc(bytes: Uint8Array): number {
  let crc = 0
  for (const byte of bytes) {
    crc = (crc ^ (byte << 24)) >>> 0
    for (let k = 0; k < 8; k++) crc = (crc & 0x8000_0000 ? (crc << 1) ^ 0x04c1_1db7 : crc << 1) >>> 0
  }
  return crc
}

const SLOT_BYTES = FRAME_SAMPLES
const concat = (frames: readonly Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(frames.length * SLOT_BYTES)
  for (const [i, f] of frames.entries()) out.set(f, i * SLOT_BYTES)
  return out
}

/** The call as pushed: both sides' μ-law, slot by slot, and where each spoke (in slots of the take). */
interface Script {
  readonly callee: Uint8Array
  readonly agent: Uint8Array
  readonly slots: number
}

/** 200 ms quiet, the callee's line, 500 ms, the agent's line, 500 ms. */
async function script(): Promise<Script> {
  const callee = concat(
    (await speakForPhone("Hello, I got your letter about the balance on my account.", { gender: "male", speed: 1 }))
      .frames,
  )
  const agent = concat(
    (await speakForPhone("Thank you. I can offer three monthly payments.", { gender: "female", speed: 1 })).frames,
  )
  const lead = 10
  const gap = 25
  const calleeSlots = callee.length / SLOT_BYTES
  const agentSlots = agent.length / SLOT_BYTES
  const slots = lead + calleeSlots + gap + agentSlots + gap
  const c = new Uint8Array(slots * SLOT_BYTES).fill(0xff)
  const a = new Uint8Array(slots * SLOT_BYTES).fill(0xff)
  c.set(callee, lead * SLOT_BYTES)
  a.set(agent, (lead + calleeSlots + gap) * SLOT_BYTES)
  return { callee: c, agent: a, slots }
}

/** Pushes the script from slot `start` in batches of 1–7 slots, as the two-track clock hands them out. */
function pushAll(take: { push(s: TrackSlots): void }, s: Script, start: number, upTo = s.slots): void {
  for (let at = 0, n = 1; at < upTo; at += n, n = (n % 7) + 1) {
    const count = Math.min(n, upTo - at)
    const range = (b: Uint8Array) => b.slice(at * SLOT_BYTES, (at + count) * SLOT_BYTES)
    take.push({ from: start + at, count, callee: range(s.callee), agent: range(s.agent) })
  }
}

interface Decoded {
  readonly channels: number
  /** Each channel's samples at 8 kHz, the pre-skip dropped and the end trimmed to the last granule. */
  readonly pcm: Int16Array[]
  readonly pages: ReturnType<typeof readOggPackets>["pages"]
  readonly durationMs: number
}

function decodeOggOpus(bytes: Uint8Array): Decoded {
  const { packets, pages, granule } = readOggPackets(bytes)
  const head = parseOpusHead(packets[0]!)
  expect(head.mappingFamily).toBe(0)
  expect(head.inputRate).toBe(PHONE_RATE)
  expect(new TextDecoder().decode(packets[1]!.subarray(0, 8))).toBe("OpusTags")
  const decoder = new OpusScript(PHONE_RATE, head.channels, OpusScript.Application.VOIP)
  const all: number[] = []
  try {
    for (const p of packets.slice(2)) {
      const out = decoder.decode(Buffer.from(p))
      const samples = new Int16Array(out.buffer, out.byteOffset, out.length / 2)
      for (const x of samples) all.push(x)
    }
  } finally {
    decoder.delete()
  }
  const skip = (head.preSkip / 6) * head.channels
  const keep = ((granule - head.preSkip) / 6) * head.channels
  const interleaved = all.slice(skip, skip + keep)
  const pcm = Array.from({ length: head.channels }, (_, c) =>
    Int16Array.from({ length: interleaved.length / head.channels }, (_, i) => interleaved[i * head.channels + c]!),
  )
  return { channels: head.channels, pcm, pages, durationMs: oggOpusDurationMs(bytes) }
}

const rms = (x: Int16Array, from: number, to: number): number => {
  let sum = 0
  for (let i = from; i < to; i++) sum += x[i]! ** 2
  return Math.sqrt(sum / Math.max(1, to - from))
}

/** 100 ms windows (800 samples) whose source is clearly speech, and clearly silent. */
function windows(source: Int16Array): { loud: number[]; quiet: number[] } {
  const loud: number[] = []
  const quiet: number[] = []
  for (let w = 0; (w + 1) * 800 <= source.length; w++) {
    const r = rms(source, w * 800, (w + 1) * 800)
    // A window beside speech may hold the codec's ringing: only those with silence either side are quiet.
    const near = rms(source, Math.max(0, (w - 1) * 800), Math.min(source.length, (w + 2) * 800))
    if (r > 1000) loud.push(w)
    else if (near === 0) quiet.push(w)
  }
  return { loud, quiet }
}

function expectValidStream(d: Decoded, channels: number, durationMs: number): void {
  expect(d.channels).toBe(channels)
  expect(d.pages[0]!.bos).toBe(true)
  expect(d.pages.slice(1).every((p) => !p.bos)).toBe(true)
  expect(d.pages.at(-1)!.eos).toBe(true)
  expect(d.pages.slice(0, -1).every((p) => !p.eos)).toBe(true)
  expect(new Set(d.pages.map((p) => p.serial)).size).toBe(1)
  expect(d.pages[0]!.granule).toBe(0)
  expect(d.pages[1]!.granule).toBe(0)
  // A page a second: a reader seeks to within a second.
  expect(d.pages.length).toBeGreaterThanOrEqual(2 + Math.floor(durationMs / 1000))
  const granules = d.pages.map((p) => p.granule)
  expect(granules).toEqual([...granules].sort((a, b) => a - b))
  expect(Math.abs(d.durationMs - durationMs)).toBeLessThanOrEqual(40)
  expect(d.pcm[0]!.length).toBe((d.durationMs / 1000) * PHONE_RATE)
}

describe("Ogg pages", () => {
  it("computes Ogg's CRC-32 as the bitwise definition does", () => {
    // CRC-32 with polynomial 0x04C11DB7, init 0, unreflected, no final XOR: the catalogue's check value.
    expect(oggCrc(new TextEncoder().encode("123456789"))).toBe(0x89a1_897f)
    expect(bitwiseCrc(new TextEncoder().encode("123456789"))).toBe(0x89a1_897f)
    const noise = Uint8Array.from({ length: 4096 }, (_, i) => (i * 2_654_435_761) >>> 24)
    expect(oggCrc(noise)).toBe(bitwiseCrc(noise))
  })

  it("writes a page whose stored CRC is the bitwise CRC of the page with the field zeroed", () => {
    const big = Uint8Array.from({ length: 600 }, (_, i) => i & 0xff)
    const page = oggPage({
      packets: [new Uint8Array([1, 2, 3]), big, new Uint8Array(255)],
      granule: 2 ** 33 + 5,
      serial: 0xdeadbeef,
      sequence: 7,
      eos: true,
    })
    const stored = new DataView(page.buffer).getUint32(22, true)
    const zeroed = page.slice()
    zeroed.fill(0, 22, 26)
    expect(stored).toBe(bitwiseCrc(zeroed))
    // Lacing: 3 | 255 255 90 | 255 0 (a packet of exactly 255 bytes ends with a 0).
    expect(Array.from(page.subarray(27, 27 + page[26]!))).toEqual([3, 255, 255, 90, 255, 0])
    const seq0 = oggPage({ packets: [new Uint8Array([9])], granule: 0, serial: 0xdeadbeef, sequence: 0, bos: true })
    const pages = new Uint8Array([
      ...seq0,
      ...oggPage({
        packets: [new Uint8Array([1, 2, 3]), big, new Uint8Array(255)],
        granule: 2 ** 33 + 5,
        serial: 0xdeadbeef,
        sequence: 1,
        eos: true,
      }),
    ])
    const read = readOggPackets(pages)
    expect(read.granule).toBe(2 ** 33 + 5)
    expect(read.packets.map((p) => p.length)).toEqual([1, 3, 600, 255])
    expect(read.packets[2]).toEqual(big)
    const corrupt = pages.slice()
    corrupt[corrupt.length - 1]! ^= 1
    expect(() => readOggPackets(corrupt)).toThrow(/CRC/)
  })
})

describe("recording encoder", () => {
  let s: Script
  let encoder: RecordingEncoder
  let parts: RecordingParts
  const START = 1_234 // the take begins mid-call: slots are counted from the call's clock

  beforeAll(async () => {
    s = await script()
    encoder = makeRecordingEncoder()
    const take = encoder.open()
    expect(encoder.takes).toBe(1)
    pushAll(take, s, START)
    parts = await take.finish()
    expect(encoder.takes).toBe(0)
  }, 60_000)

  afterAll(async () => {
    await encoder.close()
  })

  it("writes two valid Ogg Opus files as long as the slots pushed", async () => {
    expect(parts.durationMs).toBe(s.slots * 20)
    const mixed = decodeOggOpus(parts.mixed)
    const sides = decodeOggOpus(parts.sides)
    expectValidStream(mixed, 1, parts.durationMs)
    expectValidStream(sides, 2, parts.durationMs)
    expect(mixed.pages[0]!.serial).not.toBe(sides.pages[0]!.serial)
    // An independent reader agrees: codec, channels and length from the granule and pre-skip.
    for (const [bytes, channels] of [
      [parts.mixed, 1],
      [parts.sides, 2],
    ] as const) {
      const meta = await parseBuffer(bytes, { mimeType: "audio/ogg" })
      expect(meta.format.codec).toMatch(/opus/i)
      expect(meta.format.numberOfChannels).toBe(channels)
      expect(Math.abs(meta.format.duration! * 1000 - parts.durationMs)).toBeLessThanOrEqual(40)
    }
    // Compressed: far under the 8 kB a second of the two μ-law sides, each.
    const seconds = parts.durationMs / 1000
    expect(parts.mixed.length / seconds).toBeLessThan(2_400)
    expect(parts.sides.length / seconds).toBeLessThan(3_500)
  })

  it("keeps the callee on the left and the agent on the right, and both in the mix", () => {
    const callee = decode(s.callee)
    const agent = decode(s.agent)
    const mixed = decodeOggOpus(parts.mixed).pcm[0]!
    const [left, right] = decodeOggOpus(parts.sides).pcm as [Int16Array, Int16Array]
    const calleeW = windows(callee)
    const agentW = windows(agent)
    expect(calleeW.loud.length).toBeGreaterThan(10)
    expect(agentW.loud.length).toBeGreaterThan(10)
    const at = (x: Int16Array, w: number) => rms(x, w * 800, (w + 1) * 800)
    // Where a side spoke its channel and the mix carry it (Opus keeps the envelope within a few dB)…
    for (const w of calleeW.loud) {
      expect(at(left, w)).toBeGreaterThan(at(callee, w) / 4)
      expect(at(mixed, w)).toBeGreaterThan(at(callee, w) / 4)
    }
    for (const w of agentW.loud) {
      expect(at(right, w)).toBeGreaterThan(at(agent, w) / 4)
      expect(at(mixed, w)).toBeGreaterThan(at(agent, w) / 4)
    }
    // …and where it was silent, its channel is too, whatever the other side said.
    for (const w of calleeW.quiet) expect(at(left, w)).toBeLessThan(30)
    for (const w of agentW.quiet) expect(at(right, w)).toBeLessThan(30)
    const bothQuiet = calleeW.quiet.filter((w) => agentW.quiet.includes(w))
    expect(bothQuiet.length).toBeGreaterThan(0)
    for (const w of bothQuiet) expect(at(mixed, w)).toBeLessThan(30)
    // Over each line as a whole: the other channel holds nothing of it.
    const agentFrom = agentW.loud[0]! * 800
    expect(rms(right, 0, agentFrom - 800)).toBeLessThan(10)
    expect(rms(left, agentFrom, left.length)).toBeLessThan(10)
    expect(rms(left, 0, agentFrom - 800)).toBeGreaterThan(500)
    expect(rms(right, agentFrom, right.length)).toBeGreaterThan(500)
  })

  it("fills a gap between pushes with silence and skips slots already encoded", async () => {
    const take = encoder.open()
    const frame = (byte: number, n: number) => new Uint8Array(n * SLOT_BYTES).fill(byte)
    take.push({ from: 100, count: 10, callee: frame(0x20, 10), agent: frame(0xff, 10) })
    take.push({ from: 105, count: 10, callee: frame(0x20, 10), agent: frame(0xff, 10) }) // 5 already there
    take.push({ from: 140, count: 10, callee: frame(0xff, 10), agent: frame(0x20, 10) }) // 25 missing
    const { durationMs, sides } = await take.finish()
    expect(durationMs).toBe(50 * 20)
    expect(decodeOggOpus(sides).durationMs).toBe(1000)
  })

  it("drops an aborted take: nothing stays open and its finish() rejects", async () => {
    const take = encoder.open()
    pushAll(take, s, 0, 50)
    take.abort()
    expect(encoder.takes).toBe(0)
    await expect(take.finish()).rejects.toThrow(/aborted/)
    take.push({ from: 50, count: 1, callee: new Uint8Array(160), agent: new Uint8Array(160) }) // ignored
    expect(encoder.takes).toBe(0)
  })

  it("refuses takes past maxTakes", async () => {
    const small = makeRecordingEncoder({ maxTakes: 2 })
    try {
      const a = small.open()
      small.open().abort()
      const b = small.open()
      expect(() => small.open()).toThrow(RecordingEncoderBusy)
      a.abort()
      b.abort()
      expect(small.takes).toBe(0)
    } finally {
      await small.close()
    }
    expect(() => small.open()).toThrow(/closed/)
  })

  it("rejects the open takes when the worker dies, and starts a new one for the next take", async () => {
    const e = makeRecordingEncoder()
    try {
      const first = e.open()
      const second = e.open()
      pushAll(first, s, 0, 100)
      pushAll(second, s, 0, 30)
      const finishing = second.finish()
      const worker = recordingWorkerOf(e)!
      expect(worker).toBeDefined()
      await worker.terminate()
      await expect(first.finish()).rejects.toThrow(/recording worker exited/)
      // The second may have been encoded before the worker stopped; if not, it was rejected too.
      await finishing.catch((err: Error) => expect(err.message).toMatch(/recording worker exited/))
      expect(e.takes).toBe(0)
      const next = e.open()
      expect(recordingWorkerOf(e)).not.toBe(worker)
      pushAll(next, s, 0, 60)
      const parts = await next.finish()
      expect(parts.durationMs).toBe(1200)
      expectValidStream(decodeOggOpus(parts.mixed), 1, 1200)
    } finally {
      await e.close()
    }
  })

  it("rejects the takes still open on close(), but lets those finishing finish", async () => {
    const e = makeRecordingEncoder()
    const open = e.open()
    const done = e.open()
    pushAll(done, s, 0, 20)
    const finished = done.finish()
    await e.close()
    expect((await finished).durationMs).toBe(400)
    await expect(open.finish()).rejects.toThrow(/closed/)
    expect(e.takes).toBe(0)
  })

  it("stops a take at its cap and still ends it validly", () => {
    const take = new TakeEncoder(30)
    take.push(0, 50, s.callee.subarray(0, 50 * SLOT_BYTES), s.agent.subarray(0, 50 * SLOT_BYTES))
    expect(take.capped).toBe(true)
    const done = take.finish()
    expect(done.durationMs).toBe(600)
    expect(oggOpusDurationMs(done.mixed)).toBe(600)
    expectValidStream(decodeOggOpus(done.sides), 2, 600)
    const bytesCapped = new TakeEncoder(10_000, 20_000)
    bytesCapped.push(0, s.slots, s.callee, s.agent)
    expect(bytesCapped.capped).toBe(true)
    const small = bytesCapped.finish()
    expect(small.mixed.length + small.sides.length).toBeLessThanOrEqual(20_000)
    expect(small.durationMs).toBeGreaterThan(0)
    expectValidStream(decodeOggOpus(small.mixed), 1, small.durationMs)
  })
})
