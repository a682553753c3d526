// The telephony provider as a service. Only the simulator exists so far (its speed from
// SIM_TIME_SCALE); carrier adapters plug in here behind the same interface.
import { Context, Effect, Layer } from "effect"
import type { Config } from "../platform/config.js"
import { AppConfig } from "../platform/AppConfig.js"
import { makeSimTelephony } from "./telephony/sim.telephony.js"
import type { TelephonyProvider } from "./telephony/telephony.interface.js"

export class Telephony extends Context.Tag("parley/Telephony")<Telephony, TelephonyProvider>() {
  /** The simulator at `timeScale` whatever the configuration (tests). */
  static sim(timeScale: number): Layer.Layer<Telephony> {
    return Layer.sync(Telephony, () => makeSimTelephony({ timeScale }))
  }
}

/** The deployment's telephony from configuration. */
export function makeTelephony(config: Pick<Config, "simTimeScale">): TelephonyProvider {
  return makeSimTelephony({ timeScale: config.simTimeScale })
}

export const TelephonyLive: Layer.Layer<Telephony, never, AppConfig> = Layer.effect(
  Telephony,
  Effect.map(AppConfig, (config) => makeTelephony(config)),
)
