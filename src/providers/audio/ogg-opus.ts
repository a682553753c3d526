// Ogg Opus files, written and read by us: the container of a call's recordings (RFC 7845 over RFC 3533).
// The writer pages Opus packets a second at a time, so a player can seek; the reader checks every page.

/** Opus counts every stream's time at 48 kHz, whatever the input's rate. */
export const OPUS_RATE = 48_000
/** The encoder's lookahead at 48 kHz (libopus's 6.5 ms for the VoIP and audio applications). */
export const DEFAULT_PRE_SKIP = 312
/** Packets per page: 50 packets of 20 ms are a second, so a reader seeks within a second. */
const PACKETS_PER_PAGE = 50
/** A page holds at most 255 lacing values. */
const MAX_SEGMENTS = 255
const HEADER_BYTES = 27

const FLAG_CONTINUED = 0x01
const FLAG_BOS = 0x02
const FLAG_EOS = 0x04

/** Ogg's CRC-32: polynomial 0x04C11DB7, not reflected, initial value 0, no final XOR. */
const CRC_TABLE = new Uint32Array(256)
for (let i = 0; i < 256; i++) {
  let r = i << 24
  for (let k = 0; k < 8; k++) r = r & 0x8000_0000 ? (r << 1) ^ 0x04c1_1db7 : r << 1
  CRC_TABLE[i] = r >>> 0
}

/** The Ogg CRC of `bytes` (a page with its CRC field zeroed). */
export function oggCrc(bytes: Uint8Array, crc = 0): number {
  let c = crc
  for (let i = 0; i < bytes.length; i++) c = (c << 8) ^ CRC_TABLE[((c >>> 24) ^ bytes[i]!) & 0xff]!
  return c >>> 0
}

/** One Ogg page of whole packets (a packet never spans pages here: Opus packets are ≤ 1275 bytes). */
export function oggPage(o: {
  readonly packets: readonly Uint8Array[]
  readonly granule: number
  readonly serial: number
  readonly sequence: number
  readonly bos?: boolean
  readonly eos?: boolean
}): Uint8Array {
  const lacing: number[] = []
  let body = 0
  for (const p of o.packets) {
    // A packet's lacing: 255 for each full 255 bytes, then the rest (0 when it is a multiple of 255).
    for (let left = p.length; ; left -= 255) {
      lacing.push(Math.min(left, 255))
      if (left < 255) break
    }
    body += p.length
  }
  if (lacing.length > MAX_SEGMENTS) throw new RangeError(`${lacing.length} lacing values do not fit in a page`)
  const page = new Uint8Array(HEADER_BYTES + lacing.length + body)
  const view = new DataView(page.buffer)
  page.set([0x4f, 0x67, 0x67, 0x53]) // "OggS"
  page[4] = 0 // stream structure version
  page[5] = (o.bos ? FLAG_BOS : 0) | (o.eos ? FLAG_EOS : 0)
  view.setUint32(6, o.granule % 2 ** 32, true)
  view.setUint32(10, Math.floor(o.granule / 2 ** 32), true)
  view.setUint32(14, o.serial, true)
  view.setUint32(18, o.sequence, true)
  page[26] = lacing.length
  page.set(lacing, HEADER_BYTES)
  let at = HEADER_BYTES + lacing.length
  for (const p of o.packets) {
    page.set(p, at)
    at += p.length
  }
  view.setUint32(22, oggCrc(page), true)
  return page
}

const ascii = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0))

/** The identification header (RFC 7845 §5.1), channel mapping family 0: mono or stereo. */
export function opusHead(channels: 1 | 2, preSkip: number, inputRate: number): Uint8Array {
  const head = new Uint8Array(19)
  const view = new DataView(head.buffer)
  head.set(ascii("OpusHead"))
  head[8] = 1 // version
  head[9] = channels
  view.setUint16(10, preSkip, true)
  view.setUint32(12, inputRate, true)
  view.setInt16(16, 0, true) // output gain
  head[18] = 0 // mapping family
  return head
}

/** The comment header (RFC 7845 §5.2): the vendor and no user comments. */
export function opusTags(vendor: string): Uint8Array {
  const name = new TextEncoder().encode(vendor)
  const tags = new Uint8Array(8 + 4 + name.length + 4)
  const view = new DataView(tags.buffer)
  tags.set(ascii("OpusTags"))
  view.setUint32(8, name.length, true)
  tags.set(name, 12)
  view.setUint32(12 + name.length, 0, true)
  return tags
}

export interface OggOpusWriterOptions {
  readonly channels: 1 | 2
  /** The Ogg stream's serial number (one per stream). */
  readonly serial: number
  /** Samples at 48 kHz the decoder drops at the start: the encoder's lookahead. */
  readonly preSkip?: number
  /** The rate the audio was captured at, for a decoder that wants it back (8 kHz on the phone). */
  readonly inputRate?: number
  readonly vendor?: string
}

/**
 * Writes one Ogg Opus stream as its packets come: the two header pages at once, then a page per
 * second of audio, the last flagged EOS with a granule that trims the end to the audio's length.
 * Its bytes are kept as the pages written (`bytes` counts them) and joined once by `end()`.
 */
export class OggOpusWriter {
  readonly preSkip: number
  private readonly serial: number
  private readonly pages: Uint8Array[] = []
  private pending: Uint8Array[] = []
  private pendingSegments = 0
  private sequence = 0
  /** 48 kHz samples of the packets written so far (pending ones included). */
  private samples = 0
  private ended = false
  private pageBytes = 0
  private pendingBytes = 0

  constructor(o: OggOpusWriterOptions) {
    this.serial = o.serial >>> 0
    this.preSkip = o.preSkip ?? DEFAULT_PRE_SKIP
    this.write([opusHead(o.channels, this.preSkip, o.inputRate ?? 8_000)], 0, { bos: true })
    this.write([opusTags(o.vendor ?? "parley")], 0, {})
  }

  /** Bytes of the pages written, and of the packets waiting for their page. */
  get bytes(): number {
    return this.pageBytes + this.pendingBytes
  }

  /** One Opus packet of `samples48` samples at 48 kHz (960 for 20 ms). */
  add(packet: Uint8Array, samples48: number): void {
    if (this.ended) throw new Error("the Ogg Opus stream has ended")
    const segments = Math.floor(packet.length / 255) + 1
    // The page is flushed only when the next packet arrives, so end() always has a packet for its EOS page.
    if (this.pending.length >= PACKETS_PER_PAGE || this.pendingSegments + segments > MAX_SEGMENTS) {
      this.write(this.pending, this.samples, {})
      this.pending = []
      this.pendingSegments = 0
      this.pendingBytes = 0
    }
    this.pending.push(packet)
    this.pendingSegments += segments
    this.pendingBytes += packet.length
    this.samples += samples48
  }

  /**
   * The whole file. `playable48`: the audio's own length at 48 kHz (the packets hold more: the
   * lookahead's flush); the last page's granule is pre-skip + that, trimming the rest (RFC 7845 §4.4).
   */
  end(playable48 = this.samples - this.preSkip): Uint8Array {
    if (this.ended) throw new Error("the Ogg Opus stream has ended")
    if (this.pending.length === 0) throw new Error("an Ogg Opus stream needs one audio packet for its EOS page")
    const granule = Math.min(this.samples, this.preSkip + Math.max(0, playable48))
    this.write(this.pending, granule, { eos: true })
    this.pending = []
    this.pendingBytes = 0
    this.ended = true
    const out = new Uint8Array(this.pages.reduce((n, p) => n + p.length, 0))
    let at = 0
    for (const p of this.pages) {
      out.set(p, at)
      at += p.length
    }
    this.pages.length = 0
    return out
  }

  private write(packets: readonly Uint8Array[], granule: number, flags: { bos?: boolean; eos?: boolean }): void {
    const page = oggPage({ packets, granule, serial: this.serial, sequence: this.sequence++, ...flags })
    this.pages.push(page)
    this.pageBytes += page.length
  }
}

export interface OggPageInfo {
  readonly flags: number
  readonly bos: boolean
  readonly eos: boolean
  readonly granule: number
  readonly serial: number
  readonly sequence: number
}

export interface OggPackets {
  readonly packets: Uint8Array[]
  /** The last page's granule position. */
  readonly granule: number
  readonly pages: OggPageInfo[]
}

/**
 * The packets of a single-stream Ogg file, each page's CRC checked; throws on a bad capture
 * pattern, CRC, sequence or truncation, or a second stream.
 */
export function readOggPackets(bytes: Uint8Array): OggPackets {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const packets: Uint8Array[] = []
  const pages: OggPageInfo[] = []
  let partial: Uint8Array[] = []
  let at = 0
  while (at < bytes.length) {
    if (at + HEADER_BYTES > bytes.length) throw new Error(`a truncated Ogg page at byte ${at}`)
    if (view.getUint32(at, false) !== 0x4f676753) throw new Error(`no Ogg capture pattern at byte ${at}`)
    if (bytes[at + 4] !== 0) throw new Error(`Ogg stream structure version ${bytes[at + 4]} at byte ${at}`)
    const flags = bytes[at + 5]!
    const granule = view.getUint32(at + 6, true) + view.getUint32(at + 10, true) * 2 ** 32
    const serial = view.getUint32(at + 14, true)
    const sequence = view.getUint32(at + 18, true)
    const crc = view.getUint32(at + 22, true)
    const nSegments = bytes[at + 26]!
    const lacingAt = at + HEADER_BYTES
    if (lacingAt + nSegments > bytes.length) throw new Error(`a truncated Ogg page at byte ${at}`)
    const lacing = bytes.subarray(lacingAt, lacingAt + nSegments)
    const bodyLength = lacing.reduce((n, l) => n + l, 0)
    const end = lacingAt + nSegments + bodyLength
    if (end > bytes.length) throw new Error(`a truncated Ogg page at byte ${at}`)
    const page = bytes.slice(at, end)
    page.fill(0, 22, 26)
    if (oggCrc(page) !== crc) throw new Error(`Ogg page ${sequence} fails its CRC`)
    const first = pages[0]
    if (first === undefined && (flags & FLAG_BOS) === 0) throw new Error("the first Ogg page is not flagged BOS")
    if (first !== undefined && (flags & FLAG_BOS) !== 0) throw new Error(`Ogg page ${sequence} is flagged BOS`)
    if (first !== undefined && serial !== first.serial) throw new Error(`a second Ogg stream (serial ${serial})`)
    const due = first === undefined ? sequence : (first.sequence + pages.length) >>> 0
    if (sequence !== due) throw new Error(`Ogg page ${sequence} where ${due} was due`)
    if (pages.at(-1)?.eos) throw new Error(`Ogg page ${sequence} after the EOS page`)
    if ((flags & FLAG_CONTINUED) === 0 && partial.length > 0) throw new Error(`Ogg page ${sequence} drops a packet`)
    if ((flags & FLAG_CONTINUED) !== 0 && partial.length === 0)
      throw new Error(`Ogg page ${sequence} continues nothing`)
    let bodyAt = lacingAt + nSegments
    let run = 0
    for (let i = 0; i < nSegments; i++) {
      run += lacing[i]!
      if (lacing[i] === 255) continue
      partial.push(bytes.subarray(bodyAt, bodyAt + run))
      packets.push(join(partial))
      partial = []
      bodyAt += run
      run = 0
    }
    if (run > 0) partial.push(bytes.subarray(bodyAt, bodyAt + run))
    pages.push({ flags, bos: (flags & FLAG_BOS) !== 0, eos: (flags & FLAG_EOS) !== 0, granule, serial, sequence })
    at = end
  }
  if (partial.length > 0) throw new Error("the Ogg stream ends inside a packet")
  const last = pages.at(-1)
  if (last === undefined) throw new Error("no Ogg pages")
  return { packets, granule: last.granule, pages }
}

function join(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!.slice()
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

export interface OpusHeadInfo {
  readonly channels: number
  readonly preSkip: number
  readonly inputRate: number
  readonly mappingFamily: number
}

/** The fields of an OpusHead packet; throws on anything else. */
export function parseOpusHead(packet: Uint8Array): OpusHeadInfo {
  if (packet.length < 19 || new TextDecoder().decode(packet.subarray(0, 8)) !== "OpusHead")
    throw new Error("not an OpusHead packet")
  const view = new DataView(packet.buffer, packet.byteOffset, packet.byteLength)
  if ((packet[8]! & 0xf0) !== 0) throw new Error(`OpusHead version ${packet[8]}`)
  return {
    channels: packet[9]!,
    preSkip: view.getUint16(10, true),
    inputRate: view.getUint32(12, true),
    mappingFamily: packet[18]!,
  }
}

/** An Ogg Opus file's playable length in ms (its last granule less the pre-skip), each page checked. */
export function oggOpusDurationMs(bytes: Uint8Array): number {
  const { packets, granule } = readOggPackets(bytes)
  const head = parseOpusHead(packets[0] ?? new Uint8Array())
  return (Math.max(0, granule - head.preSkip) * 1000) / OPUS_RATE
}
