// The carrier media-stream protocol (Twilio-style <Connect><Stream>, which telco_a speaks): JSON
// text messages over a WebSocket. The carrier sends connected, start, media (base64 μ-law, 20 ms
// a message), mark (a mark we sent has been played), dtmf and stop; we send media, mark and clear
// (drop what is queued: barge-in). Parsing is strict and bounded: a message that is not one of
// these, or is larger than a media message can be, is refused, never half-read.
import { z } from "zod"

/** The largest text message a stream peer may send (a media message is ~300 bytes; start carries parameters). */
export const MAX_STREAM_MESSAGE_BYTES = 16 * 1024
/** The largest audio one inbound media message may carry (Twilio sends 160 bytes; a few carriers batch). */
export const MAX_MEDIA_BYTES = 8 * 1024

const Base64 = z
  .string()
  .max(Math.ceil(MAX_MEDIA_BYTES / 3) * 4, "media payload too large")
  .regex(/^[A-Za-z0-9+/]*={0,2}$/, "media payload is not base64")
const Sid = z.string().min(1).max(128)
const Digits = z.string().regex(/^\d{1,12}$/)

const Connected = z.object({ event: z.literal("connected"), protocol: z.string().max(64), version: z.string().max(32) })

const Start = z.object({
  event: z.literal("start"),
  sequenceNumber: Digits.optional(),
  streamSid: Sid,
  start: z.object({
    streamSid: Sid.optional(),
    accountSid: Sid.optional(),
    callSid: Sid,
    tracks: z
      .array(z.enum(["inbound", "outbound"]))
      .max(2)
      .optional(),
    customParameters: z.record(z.string().max(64), z.string().max(512)).optional(),
    mediaFormat: z.object({
      encoding: z.literal("audio/x-mulaw", { error: "only audio/x-mulaw is spoken" }),
      sampleRate: z.literal(8000, { error: "only 8000 Hz is spoken" }),
      channels: z.literal(1, { error: "only mono is spoken" }),
    }),
  }),
})

const Media = z.object({
  event: z.literal("media"),
  sequenceNumber: Digits.optional(),
  streamSid: Sid,
  media: z.object({
    track: z.enum(["inbound", "outbound"]).optional(),
    chunk: Digits.optional(),
    timestamp: Digits.optional(),
    payload: Base64,
  }),
})

const Mark = z.object({
  event: z.literal("mark"),
  sequenceNumber: Digits.optional(),
  streamSid: Sid,
  mark: z.object({ name: z.string().min(1).max(128) }),
})

const Dtmf = z.object({
  event: z.literal("dtmf"),
  sequenceNumber: Digits.optional(),
  streamSid: Sid,
  dtmf: z.object({ track: z.string().max(32).optional(), digit: z.string().regex(/^[0-9*#A-D]$/) }),
})

const Stop = z.object({
  event: z.literal("stop"),
  sequenceNumber: Digits.optional(),
  streamSid: Sid,
  stop: z.object({ accountSid: Sid.optional(), callSid: Sid.optional() }).optional(),
})

const Inbound = z.discriminatedUnion("event", [Connected, Start, Media, Mark, Dtmf, Stop])
export type InboundStreamMessage = z.infer<typeof Inbound>

/** One carrier message, or why it was refused (the stream is then closed). */
export type Parsed =
  | { readonly ok: true; readonly message: InboundStreamMessage }
  | { readonly ok: false; readonly reason: string }

/** Parses one text message from the carrier. Binary or oversized messages are refused unread. */
export function parseStreamMessage(text: string): Parsed {
  if (text.length > MAX_STREAM_MESSAGE_BYTES) return { ok: false, reason: "message too large" }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    return { ok: false, reason: "not JSON" }
  }
  // Fifty of these a second per call: the media message is checked by hand (the same rules as its
  // schema); anything else, or a media message that fails, goes through the schemas for its reason.
  const media = asMedia(raw)
  if (media !== undefined) return { ok: true, message: media }
  const parsed = Inbound.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    return { ok: false, reason: `${issue?.path.join(".") || "event"}: ${issue?.message ?? "invalid"}` }
  }
  return { ok: true, message: parsed.data }
}

const DIGITS = /^\d{1,12}$/
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
const MAX_PAYLOAD_CHARS = Math.ceil(MAX_MEDIA_BYTES / 3) * 4
const optionalDigits = (v: unknown) => v === undefined || (typeof v === "string" && DIGITS.test(v))

/** A valid media message as the Media schema reads it, or undefined (not one, or not valid). */
function asMedia(raw: unknown): Extract<InboundStreamMessage, { event: "media" }> | undefined {
  if (typeof raw !== "object" || raw === null) return undefined
  const m = raw as Record<string, unknown>
  if (m.event !== "media") return undefined
  const sid = m.streamSid
  if (typeof sid !== "string" || sid.length < 1 || sid.length > 128 || !optionalDigits(m.sequenceNumber))
    return undefined
  const media = m.media
  if (typeof media !== "object" || media === null) return undefined
  const { track, chunk, timestamp, payload } = media as Record<string, unknown>
  if (track !== undefined && track !== "inbound" && track !== "outbound") return undefined
  if (!optionalDigits(chunk) || !optionalDigits(timestamp)) return undefined
  if (typeof payload !== "string" || payload.length > MAX_PAYLOAD_CHARS || !BASE64.test(payload)) return undefined
  return {
    event: "media",
    streamSid: sid,
    ...(m.sequenceNumber !== undefined && { sequenceNumber: m.sequenceNumber as string }),
    media: {
      ...(track !== undefined && { track }),
      ...(chunk !== undefined && { chunk: chunk as string }),
      ...(timestamp !== undefined && { timestamp: timestamp as string }),
      payload,
    },
  }
}

/** The audio of a media message (μ-law bytes). */
export const mediaBytes = (m: Extract<InboundStreamMessage, { event: "media" }>): Buffer =>
  Buffer.from(m.media.payload, "base64")

/** A frame of our audio for the carrier to play. */
export const mediaMessage = (streamSid: string, mulaw: Uint8Array): string =>
  JSON.stringify({ event: "media", streamSid, media: { payload: Buffer.from(mulaw).toString("base64") } })

/** Asks the carrier to tell us when everything sent before it has been played. */
export const markMessage = (streamSid: string, name: string): string =>
  JSON.stringify({ event: "mark", streamSid, mark: { name } })

/** Drops the audio queued at the carrier (the callee barged in); pending marks come back. */
export const clearMessage = (streamSid: string): string => JSON.stringify({ event: "clear", streamSid })

// The carrier's side, as the simulator speaks it (and test carriers do).
const MULAW_8K = { encoding: "audio/x-mulaw", sampleRate: 8000, channels: 1 } as const

export const carrierConnected = (): string => JSON.stringify({ event: "connected", protocol: "Call", version: "1.0.0" })

export const carrierStart = (streamSid: string, callSid: string, parameters: Record<string, string> = {}): string =>
  JSON.stringify({
    event: "start",
    streamSid,
    start: { streamSid, callSid, tracks: ["inbound"], customParameters: parameters, mediaFormat: MULAW_8K },
  })

export const carrierMedia = (streamSid: string, mulaw: Uint8Array, chunk: number): string =>
  JSON.stringify({
    event: "media",
    streamSid,
    media: { track: "inbound", chunk: String(chunk), timestamp: String(chunk * 20), payload: encodeBase64(mulaw) },
  })

export const carrierMark = (streamSid: string, name: string): string =>
  JSON.stringify({ event: "mark", streamSid, mark: { name } })

export const carrierStop = (streamSid: string, callSid: string): string =>
  JSON.stringify({ event: "stop", streamSid, stop: { callSid } })

const encodeBase64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64")

/** What we send the carrier, as a carrier reads it. */
export type OutboundStreamMessage =
  | { readonly event: "media"; readonly media: { readonly payload: string } }
  | { readonly event: "mark"; readonly mark: { readonly name: string } }
  | { readonly event: "clear" }
