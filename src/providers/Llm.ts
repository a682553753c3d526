// The language-model provider as a service: the deployment's model (accounts.ts makeLlm: an
// OpenAI-compatible API when LLM_BASE_URL is set, else the offline simulator).
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { makeLlm } from "./accounts.js"
import type { LanguageModel } from "./llm/llm.interface.js"
import { makeSimLlm } from "./llm/sim.llm.js"

export class Llm extends Context.Tag("parley/Llm")<Llm, LanguageModel>() {
  /** The simulator whatever the configuration (tests). */
  static readonly sim: Layer.Layer<Llm> = Layer.sync(Llm, makeSimLlm)
}

export const LlmLive: Layer.Layer<Llm, never, AppConfig> = Layer.effect(
  Llm,
  Effect.map(AppConfig, (config) => makeLlm(config)),
)
