// What a runtime process needs to hold calls heard as audio (MEDIA_STREAMS): the media-stream URLs
// carriers are sent to (a single-use token minted per call), the pacers every playing call shares
// (one for real time; one per simulated time scale in use, whose audio runs that much faster),
// the voice-activity detector's module, the synthesiser (flite) and the recognisers (PocketSphinx
// when installed: a pool listening for the simulated callees' lines, and one with the general
// model; else, for simulated calls only, the stand-in told the callee's script). audioLeg() turns a
// carrier's leg into one the conversation speaks and hears through (runtime/voice/media-leg.ts), with
// an apology rendered ahead in its voice for when no synthesiser can speak (never silence).
import type { Logger } from "pino"
import { mintStreamToken } from "../../src/calls/media-stream-tokens.repo.js"
import type { CredentialsService } from "../../src/onboarding/Credentials.js"
import type { BusClient } from "../../src/platform/bus/bus.js"
import type { Config } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"
import { Pacer } from "../../src/platform/pacer.js"
import { DEFAULT_END_OF_SPEECH } from "../../src/providers/audio/end-of-speech.js"
import type { RecordingEncoder } from "../../src/providers/audio/recording-encoder.js"
import { Vad } from "../../src/providers/audio/vad.js"
import { fliteSynthesizer } from "../../src/providers/speech/flite.phone.js"
import { ScriptRecognizer } from "../../src/providers/speech/script.recognizer.js"
import { sketchSynthesizer } from "../../src/providers/speech/sketch.synth.js"
import { SphinxPool, sphinxAvailable } from "../../src/providers/speech/sphinx.recognizer.js"
import type {
  PhoneVoice,
  StreamingRecognizer,
  StreamingSynthesizer,
} from "../../src/providers/speech/streaming.interface.js"
import { SIM_CALLEE_LINES, type SimMediaOptions, simCalleeScript } from "../../src/providers/telephony/sim.telephony.js"
import type { CallLeg, MediaStreams } from "../../src/providers/telephony/telephony.interface.js"
import { DEFAULT_LISTENING, type RuleBook } from "../../src/workflows/rulebook.schema.js"
import { recordCall, type SaveRecording } from "./call-recorder.js"
import {
  FallbackRecognizer,
  FallbackSynth,
  type HostedSpeech,
  HostedSpeechSource,
  type ProviderFailure,
  providerFailed,
} from "./hosted-speech.js"
import { apologyRenderer, MediaLeg } from "./media-leg.js"
import { MediaSession } from "./media-session.js"
import { bargeIn, voiceFailure } from "./voice.metrics.js"

/** The path carriers' media streams connect to (api/media-streams.ts). */
const STREAM_PATH = "/media/telco_a/"
/**
 * The fastest simulated audio the engines follow: PocketSphinx recognises it (five times real time
 * is 0.1 CPU-seconds a second of it) and flite renders it. Faster, the stand-in told the callee's
 * script hears the simulated callee, and a sketched voice (src/providers/speech/sketch.synth.ts) speaks.
 */
const ENGINE_MIN_SCALE = 0.2

/** What a new decoder hears before its first call. */
const CALIBRATION_LINE = "Hello, thank you for calling. I would like to hear a little more about it, please."

export type Recognition = "pocketsphinx" | "script"

export interface VoiceRuntime {
  /** The simulated carrier's media (MEDIA_STREAMS=all), else undefined. */
  readonly simMedia: SimMediaOptions | undefined
  /** Where a real carrier is sent (PUBLIC_BASE_URL's host), else undefined. */
  readonly carrierStreams: MediaStreams | undefined
  readonly recognition: Recognition
  /**
   * A carrier's leg whose audio is on a media stream, as one the conversation speaks and hears
   * through; `dialed`: the leg as the carrier made it, when `carrier` wraps it.
   */
  /** The hosted recogniser and voice a run of the workspace's uses (hosted-speech.ts), if any. */
  speechFor(tenantId: number, persona: string, o: { platformAccounts: boolean }): Promise<HostedSpeech>
  audioLeg(
    call: {
      tenantId: number
      callId: number
      listening?: RuleBook["listening"]
      /** The run's hosted vendors: the offline engines take over from one that fails the call. */
      speech?: HostedSpeech | undefined
      /** A hosted vendor failed the call (counted already): the call's record keeps it. */
      providerFailed?: ((f: ProviderFailure) => void) | undefined
      /** The call is recorded (its rule book discloses it): both sides, kept once its audio is over. */
      record?: boolean
    },
    carrier: CallLeg,
    voice: PhoneVoice,
    dialed?: CallLeg,
  ): CallLeg
  /** The api of this process listens on `port` (--role all): the simulated carrier connects there. */
  apiListening(port: number): void
  stop(): void
}

const asWs = (url: string) => url.replace(/^http/, "ws")

export async function startVoiceRuntime(d: {
  readonly config: Config
  readonly sql: Sql
  readonly bus: BusClient
  readonly log: Logger
  readonly synth?: StreamingSynthesizer
  /** The workspaces' own speech credentials (byok), for hosted recognisers and voices. */
  readonly credentials: Pick<CredentialsService, "active">
  /** An api runs in this process too (--role all): the simulated carrier's streams can connect to it. */
  readonly withApi?: boolean
  /** Where recorded calls are encoded and kept; without it no call is recorded. */
  readonly recordings?: { readonly encoder: RecordingEncoder; readonly save: SaveRecording }
}): Promise<VoiceRuntime> {
  const { config, sql, bus, log } = d
  const synth = d.synth ?? fliteSynthesizer
  await Vad.load()
  // Faster than the engines can follow (flite renders a sentence in ~0.1 s of CPU), a sketched voice speaks.
  const synthAt = (timeScale: number): StreamingSynthesizer =>
    timeScale >= ENGINE_MIN_SCALE ? synth : sketchSynthesizer
  const pacers = new Map<number, Pacer>()
  const pacerAt = (timeScale: number): Pacer => {
    const scale = Math.min(1, timeScale)
    let p = pacers.get(scale)
    if (p === undefined) pacers.set(scale, (p = new Pacer({ timeScale: scale })))
    return p
  }
  const recognition: Recognition = sphinxAvailable() ? "pocketsphinx" : "script"
  // A line in a phone voice every new decoder hears first (its normalisation then suits phone audio).
  let calibration: Promise<readonly Uint8Array[]> | undefined
  const calibrate = () =>
    (calibration ??= synth.speak(CALIBRATION_LINE, { gender: "female", speed: 1, variant: 0 }).then(
      (s) => s.frames,
      () => [],
    ))
  const simPool = recognition === "pocketsphinx" ? new SphinxPool(SIM_CALLEE_LINES, undefined, calibrate) : undefined
  const generalPool = recognition === "pocketsphinx" ? new SphinxPool(null, undefined, calibrate) : undefined
  // Decoders are loaded ahead only where simulated calls' audio runs slow enough for the engine.
  if (simPool !== undefined && config.mediaStreams === "all" && config.simTimeScale >= ENGINE_MIN_SCALE)
    await simPool.warm(config.speechDecodersWarm)
  if (recognition === "script")
    log.warn(
      "PocketSphinx is not installed (apt-get install pocketsphinx pocketsphinx-en-us): simulated callees are " +
        "recognised by a stand-in told their script, and a real carrier's callee is not understood",
    )

  let localPort: number | undefined
  // A carrier signs its stream's upgrade over the URL it was given; the simulator's streams are not signed.
  const streamsAt = (base: () => string | undefined, signed: boolean): MediaStreams => ({
    streamUrl: async ({ tenantId, callId, timeScale }) => {
      const at = base()
      if (at === undefined) throw new Error("no address for media streams: set MEDIA_STREAM_URL or PUBLIC_BASE_URL")
      const address = `${at}${STREAM_PATH}`
      const token = await mintStreamToken(sql, tenantId, callId, {
        timeScale: timeScale ?? 1,
        ...(signed && { signedBase: address }),
      })
      return address + token
    },
  })
  const publicBase = config.publicBaseUrl === undefined ? undefined : asWs(config.publicBaseUrl)
  const simStreams = streamsAt(
    () => config.mediaStreamUrl ?? (localPort === undefined ? publicBase : `ws://127.0.0.1:${localPort}`),
    false,
  )

  // A runtime-only process reaches an api process's streams at MEDIA_STREAM_URL or PUBLIC_BASE_URL;
  // with neither, its simulated calls cannot be heard as audio and speak as text turns.
  const simReachable = d.withApi === true || config.mediaStreamUrl !== undefined || publicBase !== undefined
  const simHeard = config.mediaStreams === "all" && simReachable
  if (config.mediaStreams === "all" && !simReachable)
    log.warn(
      "MEDIA_STREAMS=all, but this runtime process knows no api process to connect simulated calls' media " +
        "streams to: set MEDIA_STREAM_URL (or PUBLIC_BASE_URL); until then its simulated calls speak as text turns",
    )

  const recognizerFor = (carrier: CallLeg): StreamingRecognizer => {
    const script = simCalleeScript(carrier)
    if (script !== undefined) {
      const engine = (carrier.timeScale ?? 1) >= ENGINE_MIN_SCALE ? simPool : undefined
      return engine?.recognizer() ?? new ScriptRecognizer(script)
    }
    return generalPool?.recognizer() ?? new ScriptRecognizer(() => undefined)
  }

  const hosted = new HostedSpeechSource(config, d.credentials)

  // What a call plays when no voice can speak, rendered in its voice as it starts (once per engine and voice).
  const apologyIn = apologyRenderer()

  return {
    speechFor: (tenantId, persona, o) => hosted.forRun(tenantId, persona, o),
    simMedia: simHeard ? { streams: simStreams, synthAt, pacerAt } : undefined,
    carrierStreams:
      config.mediaStreams === "none"
        ? undefined
        : streamsAt(() => publicBase ?? (localPort === undefined ? undefined : `ws://127.0.0.1:${localPort}`), true),
    recognition,
    audioLeg: (call, carrier, voice, dialed = carrier) => {
      const vad = Vad.now()
      const timeScale = dialed.timeScale ?? 1
      const listening = call.listening ?? DEFAULT_LISTENING
      const failed = (stage: ProviderFailure["stage"], provider: string) => (err: Error) =>
        providerFailed({ stage, provider, message: err.message.slice(0, 300) }, (f) => {
          log.warn({ call_id: call.callId, ...f }, "hosted speech failed the call: the offline engine takes over")
          call.providerFailed?.(f)
        })
      const offlineSynth = synthAt(timeScale)
      const hostedSynth = call.speech?.synth
      const makeRecognizer = call.speech?.recognizer
      const leg = new MediaLeg({
        providerCallId: carrier.providerCallId,
        timeScale,
        silenceMs: listening.reprompt_after_seconds * 1000,
        voice,
        recognizer:
          makeRecognizer === undefined
            ? recognizerFor(dialed)
            : new FallbackRecognizer(makeRecognizer(failed("recognition", "deepgram")), () => recognizerFor(dialed)),
        synth:
          hostedSynth === undefined
            ? offlineSynth
            : new FallbackSynth(hostedSynth, offlineSynth, call.speech?.voiceId, failed("synthesis", hostedSynth.name)),
        carrier,
        apology: apologyIn(offlineSynth, voice),
        onFailure: (stage, err) => {
          voiceFailure[stage].inc()
          log.warn({ err, call_id: call.callId, stage }, "voice pipeline failure")
        },
        open: (events) => {
          // A simulated call faster than the engines follow speaks with a sketched voice: nothing worth
          // keeping, and encoding it would cost a hundred times its audio's pace.
          const recording =
            call.record === true && d.recordings !== undefined && timeScale >= ENGINE_MIN_SCALE
              ? recordCall({ tenantId: call.tenantId, callId: call.callId, timeScale, log, ...d.recordings })
              : undefined
          return new MediaSession({
            bus,
            tenantId: call.tenantId,
            callId: call.callId,
            voiced: (f) => vad.voiced(f),
            pacer: pacerAt(timeScale),
            endOfSpeech: { ...DEFAULT_END_OF_SPEECH, silenceMs: listening.end_of_speech_ms },
            events: {
              ...events,
              bargeIn: (b) => {
                bargeIn.inc()
                events.bargeIn?.(b)
              },
              closed: () => {
                vad.free()
                void recording?.finish()
              },
            },
            ...(recording !== undefined && { tap: recording }),
          })
        },
      })
      return leg
    },
    apiListening: (port) => {
      localPort = port
    },
    stop: () => {
      for (const p of pacers.values()) p.stop()
      simPool?.close()
      generalPool?.close()
      hosted.close()
    },
  }
}
