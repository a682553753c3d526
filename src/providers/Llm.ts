// The language-model provider as a service: an OpenAI-compatible API when LLM_BASE_URL is set
// (LLM_API_KEY optional, for local servers), else the offline simulator.
import { Context, Effect, Layer } from "effect"
import type { Config } from "../platform/config.js"
import { AppConfig } from "../platform/AppConfig.js"
import type { LanguageModel } from "./llm/llm.interface.js"
import { makeOpenAiLlm } from "./llm/openai.llm.js"
import { makeSimLlm } from "./llm/sim.llm.js"

export class Llm extends Context.Tag("parley/Llm")<Llm, LanguageModel>() {
  /** The simulator whatever the configuration (tests). */
  static readonly sim: Layer.Layer<Llm> = Layer.sync(Llm, makeSimLlm)
}

/** The deployment's model from configuration; `fetch` replaces the global one (tests). */
export function makeLlm(
  config: Pick<Config, "llmBaseUrl" | "llmApiKey" | "llmModel" | "llmTimeoutMs"> & Partial<Pick<Config, "providerResponseLimitBytes">>,
  options: { fetch?: typeof fetch } = {},
): LanguageModel {
  if (config.llmBaseUrl === undefined) return makeSimLlm()
  return makeOpenAiLlm({
    baseUrl: config.llmBaseUrl,
    apiKey: config.llmApiKey,
    model: config.llmModel,
    timeoutMs: config.llmTimeoutMs,
    // LLM_BASE_URL is the operator's own (it may be private): the answer cap, no address guard.
    ...(config.providerResponseLimitBytes !== undefined && { outbound: { responseLimitBytes: config.providerResponseLimitBytes } }),
    ...(options.fetch !== undefined && { fetch: options.fetch }),
  })
}

export const LlmLive: Layer.Layer<Llm, never, AppConfig> = Layer.effect(
  Llm,
  Effect.map(AppConfig, (config) => makeLlm(config)),
)
