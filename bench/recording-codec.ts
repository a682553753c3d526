// bench/recording-codec: what a call's recording costs to compress, alone in this thread: CPU ms per
// second of audio and bytes per minute, for the recording's two files — Opus mono 16 kbps (the mix, for
// listening) and Opus stereo 24 kbps (the sides) in Ogg, as recording-encoder.worker.ts encodes them —
// and for MP3 (@breezystack/lamejs) at the same rates, each against its baseline in the same run: the
// μ-law as it came (the mix by g711.mix, the sides interleaved). The audio is a conversation spoken by
// flite, the callee and the agent taking turns with pauses, both sides on one 20 ms clock.
//
//   node --import tsx bench/recording-codec.ts [SECONDS=60] [--record]
//   (npm run bench -- recording-codec, once it is listed in bench/run.ts, records in RESULTS.md)
import { loadavg } from "node:os"
import { pathToFileURL } from "node:url"
import { Mp3Encoder } from "@breezystack/lamejs"
import OpusScript from "opusscript"
import { decode, FRAME_SAMPLES, mix, PHONE_RATE } from "../src/providers/audio/g711.js"
import { OggOpusWriter } from "../src/providers/audio/ogg-opus.js"
import { MIXED, type OpusSettings, SIDES, TakeEncoder } from "../src/providers/audio/recording-encoder.worker.js"
import { speakForPhone } from "../src/providers/speech/flite.phone.js"
import { machine, record } from "./lib.js"

const ROUNDS = 5

const CALLEE_LINES = [
  "Hello? Yes, this is he. Who is calling?",
  "I got a letter about it last week, but I have not had time to look at it.",
  "That sounds fair. Can I pay the first part on Friday?",
  "No, that is all. Thank you for calling.",
]
const AGENT_LINES = [
  "Good afternoon, this is Maya calling from Northwind Lending about your account.",
  "There is a balance of four hundred and twenty dollars. I can offer three monthly payments.",
  "Of course. I have noted Friday for the first payment of one hundred and forty dollars.",
  "Is there anything else I can help you with today?",
]

/** Both sides of a conversation, `seconds` long: the lines in turn, 400 ms apart. */
interface Call {
  readonly callee: Uint8Array
  readonly agent: Uint8Array
  readonly slots: number
}

async function conversation(seconds: number): Promise<Call> {
  const join = (frames: readonly Uint8Array[]) => {
    const out = new Uint8Array(frames.length * FRAME_SAMPLES)
    for (const [i, f] of frames.entries()) out.set(f, i * FRAME_SAMPLES)
    return out
  }
  const speak = (line: string, gender: "male" | "female") =>
    speakForPhone(line, { gender, speed: 1 }).then((s) => join(s.frames))
  const callee = await Promise.all(CALLEE_LINES.map((l) => speak(l, "male")))
  const agent = await Promise.all(AGENT_LINES.map((l) => speak(l, "female")))
  const slots = seconds * 50
  const c = new Uint8Array(slots * FRAME_SAMPLES).fill(0xff)
  const a = new Uint8Array(slots * FRAME_SAMPLES).fill(0xff)
  const pause = 20 * FRAME_SAMPLES
  for (let at = 0, turn = 0; at < c.length; turn++) {
    const [side, lines] = turn % 2 === 0 ? [a, agent] : [c, callee]
    const line = lines[Math.floor(turn / 2) % lines.length]!
    side.set(line.subarray(0, Math.max(0, side.length - at)), at)
    at += line.length + pause
  }
  return { callee: c, agent: a, slots }
}

interface Codec {
  readonly name: string
  readonly baseline: string | undefined
  /** Encodes the whole call, slot by slot as it would come, and returns the file's size. */
  run(call: Call): number
}

/** One Opus track as the worker writes it: μ-law decoded, the frame encoded, the packet paged. */
function opus(settings: OpusSettings, fill: (pcm: Int16Array, callee: Int16Array, agent: Int16Array) => void) {
  return (call: Call): number => {
    const encoder = new OpusScript(PHONE_RATE, settings.channels, OpusScript.Application.VOIP)
    encoder.setBitrate(settings.bitrate)
    encoder.encoderCTL(4010, settings.complexity)
    const ogg = new OggOpusWriter({ channels: settings.channels, serial: 1 })
    const pcm = new Int16Array(FRAME_SAMPLES * settings.channels)
    const input = Buffer.from(pcm.buffer)
    const callee = new Int16Array(FRAME_SAMPLES)
    const agent = new Int16Array(FRAME_SAMPLES)
    for (let s = 0; s < call.slots; s++) {
      decode(call.callee.subarray(s * FRAME_SAMPLES, (s + 1) * FRAME_SAMPLES), callee)
      decode(call.agent.subarray(s * FRAME_SAMPLES, (s + 1) * FRAME_SAMPLES), agent)
      fill(pcm, callee, agent)
      ogg.add(encoder.encode(input, FRAME_SAMPLES), 960)
    }
    pcm.fill(0)
    ogg.add(encoder.encode(input, FRAME_SAMPLES), 960)
    encoder.delete()
    return ogg.end(call.slots * 960).length
  }
}

function mp3(channels: 1 | 2, kbps: number) {
  return (call: Call): number => {
    const encoder = new Mp3Encoder(channels, PHONE_RATE, kbps)
    let bytes = 0
    const callee = new Int16Array(FRAME_SAMPLES)
    const agent = new Int16Array(FRAME_SAMPLES)
    const mono = new Int16Array(FRAME_SAMPLES)
    for (let s = 0; s < call.slots; s++) {
      decode(call.callee.subarray(s * FRAME_SAMPLES, (s + 1) * FRAME_SAMPLES), callee)
      decode(call.agent.subarray(s * FRAME_SAMPLES, (s + 1) * FRAME_SAMPLES), agent)
      if (channels === 2) bytes += encoder.encodeBuffer(callee, agent).byteLength
      else {
        for (let i = 0; i < FRAME_SAMPLES; i++) mono[i] = Math.min(32_767, Math.max(-32_768, callee[i]! + agent[i]!))
        bytes += encoder.encodeBuffer(mono).byteLength
      }
    }
    return bytes + encoder.flush().byteLength
  }
}

const sum = (pcm: Int16Array, c: Int16Array, a: Int16Array) => {
  for (let i = 0; i < FRAME_SAMPLES; i++) pcm[i] = Math.min(32_767, Math.max(-32_768, c[i]! + a[i]!))
}
const interleave = (pcm: Int16Array, c: Int16Array, a: Int16Array) => {
  for (let i = 0; i < FRAME_SAMPLES; i++) {
    pcm[2 * i] = c[i]!
    pcm[2 * i + 1] = a[i]!
  }
}

const CODECS: Codec[] = [
  {
    name: "μ-law mix (g711.mix), as it came",
    baseline: undefined,
    run: (call) => {
      let bytes = 0
      for (let s = 0; s < call.slots; s++) {
        const at = s * FRAME_SAMPLES
        bytes += mix(call.callee.subarray(at, at + FRAME_SAMPLES), call.agent.subarray(at, at + FRAME_SAMPLES)).length
      }
      return bytes
    },
  },
  {
    name: "μ-law sides interleaved, as they came",
    baseline: undefined,
    run: (call) => {
      const out = new Uint8Array(call.slots * FRAME_SAMPLES * 2)
      for (let i = 0; i < call.callee.length; i++) {
        out[2 * i] = call.callee[i]!
        out[2 * i + 1] = call.agent[i]!
      }
      return out.length
    },
  },
  {
    name: `Opus mono ${MIXED.bitrate / 1000} kbps, complexity ${MIXED.complexity}, Ogg (mixed)`,
    baseline: "μ-law mix (g711.mix), as it came",
    run: opus(MIXED, sum),
  },
  {
    name: `Opus stereo ${SIDES.bitrate / 1000} kbps, complexity ${SIDES.complexity}, Ogg (sides)`,
    baseline: "μ-law sides interleaved, as they came",
    run: opus(SIDES, interleave),
  },
  {
    name: "both, as the worker's TakeEncoder does them",
    baseline: undefined,
    run: (call) => {
      const take = new TakeEncoder()
      take.push(0, call.slots, call.callee, call.agent)
      const done = take.finish()
      return done.mixed.length + done.sides.length
    },
  },
  { name: "MP3 mono 16 kbps (lamejs)", baseline: "μ-law mix (g711.mix), as it came", run: mp3(1, 16) },
  { name: "MP3 stereo 24 kbps (lamejs)", baseline: "μ-law sides interleaved, as they came", run: mp3(2, 24) },
]

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export async function benchRecordingCodec(o: { seconds?: number; record?: boolean } = {}): Promise<void> {
  const seconds = o.seconds ?? 60
  const call = await conversation(seconds)
  const load = loadavg()[0]!
  // A warm-up pass (the wasm compiled, the JIT settled), then rounds in turn, so drift hits every codec alike.
  const bytes = new Map(CODECS.map((c) => [c.name, c.run(call)]))
  const cpu = new Map<string, number[]>(CODECS.map((c) => [c.name, []]))
  for (let r = 0; r < ROUNDS; r++) {
    for (const c of r % 2 === 0 ? CODECS : [...CODECS].reverse()) {
      const u = process.cpuUsage()
      c.run(call)
      const d = process.cpuUsage(u)
      cpu.get(c.name)!.push((d.user + d.system) / 1000 / seconds)
    }
  }
  const msPerS = (name: string) => median(cpu.get(name)!)
  const perMin = (name: string) => (bytes.get(name)! * 60) / seconds
  const rows = CODECS.map((c) => {
    const ms = msPerS(c.name)
    const size = perMin(c.name)
    const vs =
      c.baseline === undefined
        ? "– | –"
        : `${(ms / msPerS(c.baseline)).toFixed(1)}× | ${(size / perMin(c.baseline)).toFixed(3)}× ` +
          `(1/${(perMin(c.baseline) / size).toFixed(1)})`
    return `| ${c.name} | ${ms.toFixed(2)} | ${Math.round(size / 1024)} | ${vs} |`
  })
  const both = msPerS(CODECS[4]!.name)
  const md = [
    "## recording-codec — a call recording's two files: Opus (Ogg) and MP3 vs the μ-law as it came",
    "",
    `Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; 1-minute load average ` +
      `${load.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after (the machine is shared). ` +
      `${seconds} s of a conversation spoken by flite (callee a man, agent a woman, taking turns with 400 ms ` +
      `pauses), μ-law 8 kHz on one 20 ms clock, encoded slot by slot in this thread (no worker, no I/O); ` +
      `a warm-up pass, then ${ROUNDS} rounds in alternating order; CPU by process.cpuUsage, medians.`,
    "",
    "| codec | CPU ms per audio s | KiB per minute | CPU vs baseline | size vs baseline |",
    "|---|---:|---:|---:|---:|",
    ...rows,
    "",
    `A take (both Opus files) costs ${both.toFixed(1)} ms of the worker's core per second of call: one ` +
      `worker keeps up with about ${Math.floor(1000 / both)} calls at full load ` +
      `(DEFAULT_MAX_TAKES in recording-encoder.ts leaves room below that).`,
  ].join("\n")
  process.stdout.write(`\n${md}\n`)
  if (o.record ?? true) record("recording-codec", md)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const args = process.argv.slice(2)
  const seconds = Number(args.find((a) => /^\d+$/.test(a)) ?? 60)
  await benchRecordingCodec({ seconds, record: args.includes("--record") })
}
