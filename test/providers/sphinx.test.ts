// Offline recognition (src/providers/speech/sphinx.recognizer.ts): PocketSphinx, through koffi,
// hears phone audio frame by frame and recognises which of the callee's lines was said, in the
// voices the agent's own synthesis speaks (flite, src/providers/speech/flite.phone.ts).
import { describe, expect, it } from "vitest"
import { speakForPhone } from "../../src/providers/speech/flite.phone.js"
import { SphinxDecoder, SphinxPool, sphinxAvailable, wordsOf } from "../../src/providers/speech/sphinx.recognizer.js"

/** CI installs pocketsphinx (.ci/run) and sets this, so these cannot skip there. */
const required = process.env.REQUIRE_POCKETSPHINX === "1"

const LINES = [
  "Yes, I would like to renew my membership.",
  "Can you do it for less?",
  "No thank you.",
  "Please call me back tomorrow.",
  "I want to speak to a manager.",
]

describe("wordsOf", () => {
  it("spells a line as the dictionary does", () => {
    expect(wordsOf("Yes, I'd like it -- for $20!")).toEqual(["yes", "i'd", "like", "it", "for"])
  })
})

describe.skipIf(!required && !sphinxAvailable())("PocketSphinx on phone audio", () => {
  it("recognises each of the callee's lines in several voices, with partial results on the way", async () => {
    const decoder = SphinxDecoder.create()
    try {
      expect(decoder.listenFor([...LINES, "Frobnicate the xyzzyq."])).toHaveLength(LINES.length)
      for (const [i, line] of LINES.entries()) {
        const voice =
          i % 2 === 0 ? { gender: "female" as const, speed: 1 } : { gender: "male" as const, speed: 1, variant: i }
        const { frames } = await speakForPhone(line, voice)
        let partials = 0
        for (const [k, f] of frames.entries()) {
          decoder.frame(f)
          if (k === Math.floor(frames.length * 0.8) && decoder.partial() !== "") partials++
        }
        expect(decoder.end(), line).toBe(wordsOf(line).join(" "))
        expect(partials, `a partial result for "${line}"`).toBe(1)
      }
    } finally {
      decoder.free()
    }
  })

  it("refuses a list with nothing it can recognise, and a frame of the wrong size", () => {
    const decoder = SphinxDecoder.create()
    try {
      expect(() => decoder.listenFor(["xyzzyq plugh"])).toThrow(/no phrase/)
      expect(() => decoder.frame(new Uint8Array(10))).toThrow(RangeError)
    } finally {
      decoder.free()
    }
  })

  it("lends a pool's decoders per utterance, off the event loop, holding no more than its cap", async () => {
    const pool = new SphinxPool(LINES, 2)
    try {
      const a = pool.recognizer()
      const b = pool.recognizer()
      const c = pool.recognizer()
      const [x, y, z] = await Promise.all(
        [LINES[0]!, LINES[1]!, LINES[2]!].map((l) => speakForPhone(l, { gender: "female", speed: 1 })),
      )
      // Three callees speak at once: two decoders exist, the third utterance's frames wait for one.
      const n = Math.max(x!.frames.length, y!.frames.length, z!.frames.length)
      for (let k = 0; k < n; k++) {
        if (k < x!.frames.length) a.frame(x!.frames[k]!)
        if (k < y!.frames.length) b.frame(y!.frames[k]!)
        if (k < z!.frames.length) c.frame(z!.frames[k]!)
      }
      expect(pool.decoders).toBe(2)
      const first = await Promise.all([a.end(), b.end()])
      expect(first).toEqual([wordsOf(LINES[0]!).join(" "), wordsOf(LINES[1]!).join(" ")])
      // A decoder given back went to the waiting utterance, which heard it whole.
      expect(await c.end()).toBe(wordsOf(LINES[2]!).join(" "))
      expect(pool.decoders).toBe(2)
      a.free()
      b.free()
      c.free()
    } finally {
      pool.close()
    }
  })
})
