// The carrier media-stream messages: the documented examples parse, anything else is refused with
// a reason, and what we send has the documented shape.
import { describe, expect, it } from "vitest"
import { encode, FRAME_SAMPLES } from "../../src/providers/audio/g711.js"
import {
  clearMessage,
  MAX_STREAM_MESSAGE_BYTES,
  markMessage,
  mediaBytes,
  mediaMessage,
  parseStreamMessage,
} from "../../src/providers/telephony/media-stream.messages.js"

const SID = "MZ18ad3ab5a668481ce02b83e7395059f0"
const frame = encode(new Int16Array(FRAME_SAMPLES).fill(1000))

describe("carrier media-stream messages", () => {
  it("parses the protocol's messages", () => {
    const start = parseStreamMessage(
      JSON.stringify({
        event: "start",
        sequenceNumber: "1",
        streamSid: SID,
        start: {
          accountSid: "AC123",
          streamSid: SID,
          callSid: "CA123",
          tracks: ["inbound"],
          mediaFormat: { encoding: "audio/x-mulaw", sampleRate: 8000, channels: 1 },
          customParameters: { token: "t0k3n" },
        },
      }),
    )
    expect(start).toMatchObject({ ok: true, message: { event: "start", start: { callSid: "CA123" } } })
    const media = parseStreamMessage(
      JSON.stringify({
        event: "media",
        sequenceNumber: "3",
        streamSid: SID,
        media: { track: "inbound", chunk: "1", timestamp: "5", payload: Buffer.from(frame).toString("base64") },
      }),
    )
    expect(media.ok).toBe(true)
    if (media.ok && media.message.event === "media") expect(new Uint8Array(mediaBytes(media.message))).toEqual(frame)
    for (const m of [
      { event: "connected", protocol: "Call", version: "1.0.0" },
      { event: "mark", sequenceNumber: "4", streamSid: SID, mark: { name: "sentence-1" } },
      { event: "dtmf", streamSid: SID, sequenceNumber: "5", dtmf: { track: "inbound_track", digit: "1" } },
      { event: "stop", sequenceNumber: "6", streamSid: SID, stop: { accountSid: "AC123", callSid: "CA123" } },
    ])
      expect(parseStreamMessage(JSON.stringify(m)).ok, m.event).toBe(true)
  })

  it("refuses what is not the protocol, with a reason", () => {
    const refused = (text: string) => {
      const r = parseStreamMessage(text)
      expect(r.ok, text.slice(0, 60)).toBe(false)
      return r.ok ? "" : r.reason
    }
    expect(refused("not json")).toBe("not JSON")
    expect(refused(JSON.stringify({ event: "rewind", streamSid: SID }))).toMatch(/event/)
    expect(refused(JSON.stringify({ event: "media", streamSid: SID, media: { payload: "%%%" } }))).toMatch(/base64/)
    expect(
      refused(
        JSON.stringify({
          event: "start",
          streamSid: SID,
          start: { callSid: "CA1", mediaFormat: { encoding: "audio/l16", sampleRate: 16000, channels: 1 } },
        }),
      ),
    ).toMatch(/mulaw/)
    expect(refused(" ".repeat(MAX_STREAM_MESSAGE_BYTES + 1))).toBe("message too large")
    expect(refused(JSON.stringify({ event: "dtmf", streamSid: SID, dtmf: { digit: "12" } }))).toMatch(/digit/)
  })

  it("writes media, mark and clear as the carrier reads them", () => {
    expect(JSON.parse(mediaMessage(SID, frame))).toEqual({
      event: "media",
      streamSid: SID,
      media: { payload: Buffer.from(frame).toString("base64") },
    })
    expect(JSON.parse(markMessage(SID, "sentence-2"))).toEqual({
      event: "mark",
      streamSid: SID,
      mark: { name: "sentence-2" },
    })
    expect(JSON.parse(clearMessage(SID))).toEqual({ event: "clear", streamSid: SID })
  })
})
