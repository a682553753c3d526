// The telephony provider as a service: the simulator at SIM_TIME_SCALE (accounts.ts makeTelephony).
// Calls on a telco_a account, the platform's or a byok workspace's, go through accounts.ts
// providerResolver, which builds one adapter per account.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { makeTelephony } from "./accounts.js"
import { makeSimTelephony } from "./telephony/sim.telephony.js"
import type { TelephonyProvider } from "./telephony/telephony.interface.js"

export class Telephony extends Context.Tag("parley/Telephony")<Telephony, TelephonyProvider>() {
  /** The simulator at `timeScale` whatever the configuration (tests). */
  static sim(timeScale: number): Layer.Layer<Telephony> {
    return Layer.sync(Telephony, () => makeSimTelephony({ timeScale }))
  }
}

export const TelephonyLive: Layer.Layer<Telephony, never, AppConfig> = Layer.effect(
  Telephony,
  Effect.map(AppConfig, (config) => makeTelephony(config)),
)
