// The DSR recordings zip: written as read, readable by a zip reader, stopping when the reader leaves.
import { unzipSync } from "fflate"
import { describe, expect, it } from "vitest"
import { writeZip, type ZipEntry } from "../../src/dsr/recordings-zip.js"

async function* chunksOf(bytes: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size)
}
async function* entries(list: ZipEntry[]): AsyncIterable<ZipEntry> {
  yield* list
}

describe("the recordings zip", () => {
  it("holds each file as it was, under its name", async () => {
    const a = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 7) & 0xff)
    const b = new TextEncoder().encode("OggS tiny")
    const parts: Uint8Array[] = []
    const whole = await writeZip(
      entries([
        { name: "call-1-mixed.ogg", modified: new Date("2026-11-01T10:00:00Z"), chunks: chunksOf(a, 65_536) },
        { name: "call-1-sides.ogg", modified: new Date("2026-11-01T10:00:00Z"), chunks: chunksOf(b, 4) },
      ]),
      async (c) => {
        parts.push(c.slice())
        return true
      },
    )
    expect(whole).toBe(true)
    const files = unzipSync(Buffer.concat(parts))
    expect(Object.keys(files)).toEqual(["call-1-mixed.ogg", "call-1-sides.ogg"])
    expect(Buffer.from(files["call-1-mixed.ogg"]!).equals(Buffer.from(a))).toBe(true)
    expect(new TextDecoder().decode(files["call-1-sides.ogg"])).toBe("OggS tiny")
  })

  it("stops reading the recordings once the reader is gone", async () => {
    let read = 0
    async function* slow(): AsyncIterable<Uint8Array> {
      for (let i = 0; i < 100; i++) {
        read++
        yield new Uint8Array(1000)
      }
    }
    const whole = await writeZip(entries([{ name: "x.ogg", modified: new Date(), chunks: slow() }]), async () => false)
    expect(whole).toBe(false)
    expect(read).toBeLessThan(3)
  })
})
