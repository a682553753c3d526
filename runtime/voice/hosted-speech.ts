// Hosted speech on the media path (issue 38): a call heard as audio is recognised and spoken by the
// workspace's own vendors when it brings them (byok: its `stt` credential speaks Deepgram's live
// protocol, its `tts` credential ElevenLabs' input streaming, cloned voices by their vendor id or a
// persona by the credential's voice map), else by the platform's accounts (STT_API_KEY;
// SPEECH_API_URL with SPEECH_API_KEY), else by the offline engines alone. A hosted vendor that fails
// mid-call hands the call to the offline engine for the rest of it, so the callee never hears dead
// air: the sentence the voice could not speak is spoken by flite, and an utterance the recogniser
// lost is answered as one nobody understood ("Sorry, I didn't catch that"). Each hand-over is
// counted (parley_voice_provider_failures_total) and told to the call (its provider_failures).
import { createHash } from "node:crypto"
import type { HostedSpeechPart } from "../../src/billing/pricing.js"
import type { CredentialsService } from "../../src/onboarding/Credentials.js"
import type { Config } from "../../src/platform/config.js"
import { FastCounter } from "../../src/platform/metrics.js"
import { outboundFor } from "../../src/providers/outbound.js"
import {
  type DeepgramRecognizers,
  type HostedRecognizer,
  makeDeepgramRecognizers,
} from "../../src/providers/speech/deepgram.recognizer.js"
import { makeElevenLabsStreamingSynth } from "../../src/providers/speech/elevenlabs.stream.js"
import type {
  PhoneSpeech,
  PhoneVoice,
  StreamingRecognizer,
  StreamingSynthesizer,
} from "../../src/providers/speech/streaming.interface.js"

export type HostedStage = "recognition" | "synthesis"

/** A vendor that failed a call, as the call keeps it. */
export interface ProviderFailure {
  readonly stage: HostedStage
  readonly provider: string
  readonly message: string
}

/** The hosted vendors one run's calls use (none: the offline engines). */
export interface HostedSpeech {
  /** A call's recogniser; `gaveUp` is told once if it fails the call. */
  readonly recognizer?: ((gaveUp: (err: Error) => void) => HostedRecognizer) | undefined
  readonly synth?: StreamingSynthesizer | undefined
  /** The vendor voice the run's persona speaks with (a tts credential's voice map), if it names one. */
  readonly voiceId?: string | undefined
  /** What of it runs on the platform's accounts, paid for in the call's price (src/billing/pricing.ts). */
  readonly platformParts: readonly HostedSpeechPart[]
}

const failures = new FastCounter(
  "parley_voice_provider_failures_total",
  "Hosted speech vendors that failed a call heard as audio (the call went on with the offline engine), by stage",
)
const failed = {
  recognition: failures.child({ stage: "recognition" }),
  synthesis: failures.child({ stage: "synthesis" }),
}

const asWs = (url: string) => url.replace(/^http/, "ws")
const keyOf = (...parts: string[]) => createHash("sha256").update(parts.join("\n")).digest("hex")
const str = (v: unknown): string | undefined => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined)

/** Where a run's hosted speech comes from: the workspace's credentials, else the platform's accounts. */
export class HostedSpeechSource {
  private readonly recognizers = new Map<string, DeepgramRecognizers>()
  private readonly synths = new Map<string, StreamingSynthesizer>()

  constructor(
    private readonly config: Pick<
      Config,
      "sttApi" | "speechApi" | "allowPrivateProviderUrls" | "providerResponseLimitBytes"
    >,
    private readonly credentials: Pick<CredentialsService, "active">,
  ) {}

  /**
   * The hosted vendors for a run of `tenantId`'s speaking as `persona`; the platform's accounts only
   * for a run whose calls pay for them (`platformAccounts`: billed on the platform's accounts; a
   * workspace on its own accounts, a rehearsal or a demo gets its own keys' vendors or the offline engines).
   */
  async forRun(tenantId: number, persona: string, o: { platformAccounts: boolean }): Promise<HostedSpeech> {
    const [stt, tts] = await Promise.all([
      this.credentials.active(tenantId, "stt"),
      this.credentials.active(tenantId, "tts"),
    ])
    const platformStt = o.platformAccounts ? this.config.sttApi : undefined
    const platformTts = o.platformAccounts ? this.config.speechApi : undefined
    const recognizers =
      stt !== undefined
        ? this.recognizersAt("tenant", asWs(str(stt.extra.api_base_url) ?? "wss://api.deepgram.com"), stt.secret)
        : platformStt === undefined
          ? undefined
          : this.recognizersAt("platform", asWs(platformStt.url), platformStt.apiKey)
    const synth =
      tts !== undefined
        ? this.synthAt("tenant", str(tts.extra.api_base_url) ?? "wss://api.elevenlabs.io", tts.secret, undefined)
        : platformTts === undefined
          ? undefined
          : this.synthAt("platform", platformTts.url, platformTts.apiKey, platformTts.defaultVoiceId)
    const map = tts?.extra.voice_map
    const voiceId = typeof map === "object" && map !== null ? str((map as Record<string, unknown>)[persona]) : undefined
    const platformParts: HostedSpeechPart[] = [
      ...(stt === undefined && recognizers !== undefined ? (["recognition"] as const) : []),
      ...(tts === undefined && synth !== undefined ? (["voice"] as const) : []),
    ]
    return {
      platformParts,
      ...(recognizers !== undefined && { recognizer: (gaveUp) => recognizers.recognizer(gaveUp) }),
      ...(synth !== undefined && { synth }),
      ...(voiceId !== undefined && { voiceId }),
    }
  }

  /** Every hosted recogniser's socket closed (the process stops). */
  close(): void {
    for (const r of this.recognizers.values()) r.close()
    this.recognizers.clear()
  }

  private recognizersAt(source: "tenant" | "platform", url: string, apiKey: string): DeepgramRecognizers {
    const key = keyOf(source, url, apiKey)
    let r = this.recognizers.get(key)
    if (r === undefined) {
      r = makeDeepgramRecognizers({
        apiKey,
        baseUrl: url,
        dispatcher: outboundFor(this.config, source).dispatcher,
      })
      this.recognizers.set(key, r)
    }
    return r
  }

  private synthAt(
    source: "tenant" | "platform",
    url: string,
    apiKey: string,
    defaultVoiceId: string | undefined,
  ): StreamingSynthesizer {
    const key = keyOf(source, url, apiKey, defaultVoiceId ?? "")
    let s = this.synths.get(key)
    if (s === undefined) {
      s = makeElevenLabsStreamingSynth({
        apiKey,
        baseUrl: url,
        defaultVoiceId,
        outbound: outboundFor(this.config, source),
      })
      this.synths.set(key, s)
    }
    return s
  }
}

/** Records a vendor failing a call: counted, and told to whoever keeps the call's record. */
export const providerFailed = (f: ProviderFailure, tell: (f: ProviderFailure) => void): void => {
  failed[f.stage].inc()
  tell(f)
}

/**
 * Speaks with the hosted voice until it fails a sentence; that sentence and the rest of the call are
 * spoken by the offline synthesiser (a vendor that failed once would add its timeout to every line).
 */
export class FallbackSynth implements StreamingSynthesizer {
  private broken = false

  constructor(
    private readonly hosted: StreamingSynthesizer,
    private readonly offline: StreamingSynthesizer,
    private readonly voiceId: string | undefined,
    private readonly gaveUp: (err: Error) => void,
  ) {}

  get name(): string {
    return this.broken ? this.offline.name : this.hosted.name
  }

  async speak(text: string, voice: PhoneVoice): Promise<PhoneSpeech> {
    if (!this.broken) {
      const own = voice.vendor_voice_id === undefined && this.voiceId !== undefined
      try {
        return await this.hosted.speak(text, own ? { ...voice, vendor_voice_id: this.voiceId } : voice)
      } catch (err) {
        this.broken = true
        this.gaveUp(err instanceof Error ? err : new Error(String(err)))
      }
    }
    return this.offline.speak(text, voice)
  }
}

/** Hears with the hosted recogniser until it gives up on the call, then with the offline one. */
export class FallbackRecognizer implements StreamingRecognizer {
  private offline: StreamingRecognizer | undefined

  constructor(
    private readonly hosted: HostedRecognizer,
    private readonly makeOffline: () => StreamingRecognizer,
  ) {}

  private get current(): StreamingRecognizer {
    return this.hosted.failed ? (this.offline ??= this.makeOffline()) : this.hosted
  }

  frame(mulaw: Uint8Array): void {
    this.current.frame(mulaw)
  }

  partial(): string {
    return this.current.partial()
  }

  end(): Promise<string> {
    return this.current.end()
  }

  free(): void {
    this.hosted.free()
    this.offline?.free()
  }
}
