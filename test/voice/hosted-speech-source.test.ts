// Which vendors a run's calls are heard through, and what of it the platform's accounts carry.
import { describe, expect, it } from "vitest"
import { HostedSpeechSource } from "../../runtime/voice/hosted-speech.js"

const config = {
  sttApi: { url: "wss://stt.example", apiKey: "platform-stt" },
  speechApi: { url: "https://tts.example", apiKey: "platform-tts", defaultVoiceId: "v1" },
  allowPrivateProviderUrls: false,
  providerResponseLimitBytes: 1 << 20,
}
const noKeys = { active: async () => undefined }

describe("hosted speech for a run", () => {
  it("gives a run that pays for it the platform's accounts, and says so for its price", async () => {
    const source = new HostedSpeechSource(config, noKeys)
    const speech = await source.forRun(1, "asha", { platformAccounts: true })
    expect(speech.platformParts).toEqual(["recognition", "voice"])
    expect(speech.recognizer).toBeDefined()
    expect(speech.synth).toBeDefined()
    source.close()
  })

  it("never gives the platform's accounts to a run that does not pay for them (own accounts)", async () => {
    const source = new HostedSpeechSource(config, noKeys)
    const speech = await source.forRun(1, "asha", { platformAccounts: false })
    expect(speech).toEqual({ platformParts: [] })
    source.close()
  })

  it("prices nothing a workspace's own keys carry", async () => {
    const own = {
      active: async (_t: number, kind: string) =>
        kind === "stt"
          ? { secret: "own-stt", extra: {} }
          : kind === "tts"
            ? { secret: "own-tts", extra: {} }
            : undefined,
    }
    const source = new HostedSpeechSource(config, own as never)
    const speech = await source.forRun(1, "asha", { platformAccounts: true })
    expect(speech.platformParts).toEqual([])
    expect(speech.recognizer).toBeDefined()
    source.close()
  })
})
