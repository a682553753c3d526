// Voice samples made in the test: a "voice" as a sine at a chosen pitch, its level pulsed at a
// chosen syllable rate, written as 16-bit PCM WAV or encoded to MP3 with lamejs; and the clone form.
import { Mp3Encoder } from "@breezystack/lamejs"

export interface Tone {
  /** Pitch of the sine. */
  readonly hz: number
  readonly seconds: number
  readonly sampleRate?: number
  /** Level pulses a second (syllables); 0 = a steady tone. Default 4. */
  readonly syllablesPerSecond?: number
  readonly channels?: number
}

/** The tone as 16-bit PCM samples, interleaved when stereo. */
export function tonePcm(t: Tone): Int16Array {
  const rate = t.sampleRate ?? 22_050
  const channels = t.channels ?? 1
  const frames = Math.round(t.seconds * rate)
  const pulses = t.syllablesPerSecond ?? 4
  const out = new Int16Array(frames * channels)
  for (let i = 0; i < frames; i++) {
    const time = i / rate
    // Each pulse rises and falls to silence, as syllables do.
    const level = pulses === 0 ? 1 : 0.5 * (1 - Math.cos(2 * Math.PI * pulses * time))
    const v = Math.round(12_000 * level * Math.sin(2 * Math.PI * t.hz * time))
    for (let c = 0; c < channels; c++) out[i * channels + c] = v
  }
  return out
}

export function wav(t: Tone): Buffer {
  const rate = t.sampleRate ?? 22_050
  const channels = t.channels ?? 1
  const pcm = tonePcm(t)
  const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength)
  const head = Buffer.alloc(44)
  head.write("RIFF", 0, "latin1")
  head.writeUInt32LE(36 + data.length, 4)
  head.write("WAVE", 8, "latin1")
  head.write("fmt ", 12, "latin1")
  head.writeUInt32LE(16, 16)
  head.writeUInt16LE(1, 20)
  head.writeUInt16LE(channels, 22)
  head.writeUInt32LE(rate, 24)
  head.writeUInt32LE(rate * channels * 2, 28)
  head.writeUInt16LE(channels * 2, 32)
  head.writeUInt16LE(16, 34)
  head.write("data", 36, "latin1")
  head.writeUInt32LE(data.length, 40)
  return Buffer.concat([head, data])
}

export function mp3(t: Tone): Buffer {
  const rate = t.sampleRate ?? 22_050
  const pcm = tonePcm({ ...t, channels: 1 })
  const encoder = new Mp3Encoder(1, rate, 48)
  const parts: Buffer[] = []
  const keep = (chunk: ArrayBufferView) => {
    if (chunk.byteLength > 0) parts.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
  }
  for (let i = 0; i < pcm.length; i += 1152) keep(encoder.encodeBuffer(pcm.subarray(i, i + 1152)))
  keep(encoder.flush())
  return Buffer.concat(parts)
}

/** POSTs a clone form (fields in the order given; `sample` as a file) with a bearer token. */
export function postClone(
  url: string,
  token: string | undefined,
  form: { name?: string; sample?: { bytes: Buffer; filename: string; type: string }; field?: string },
): Promise<Response> {
  const body = new FormData()
  if (form.name !== undefined) body.set("name", form.name)
  if (form.sample !== undefined)
    body.set(form.field ?? "sample", new Blob([form.sample.bytes], { type: form.sample.type }), form.sample.filename)
  return fetch(`${url}/api/voice-avatars/clone`, {
    method: "POST",
    body,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  })
}
