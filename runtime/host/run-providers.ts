// What a claimed run dials on: the workspace's carrier and language model (its own accounts or the
// platform's, src/providers/accounts.ts), the money its calls hold and settle, its settings and its
// carrier's pacing key. A rehearsal campaign's run (src/rehearsals/) goes out on the sim carrier,
// free of charge; the public demo's calls are free too.
import type { Logger } from "pino"
import { callTerms } from "../../src/billing/call-terms.js"
import type { CredentialsService } from "../../src/onboarding/Credentials.js"
import type { BusClient } from "../../src/platform/bus/bus.js"
import type { WallClock } from "../../src/platform/Clock.js"
import type { Config } from "../../src/platform/config.js"
import type { Sql } from "../../src/platform/Db.js"
import { providerResolver, type TenantProviders } from "../../src/providers/accounts.js"
import type { LanguageModel } from "../../src/providers/llm/llm.interface.js"
import { makeSimTelephony } from "../../src/providers/telephony/sim.telephony.js"
import type { TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import type { ClaimedRun, RunSetup } from "../../src/runs/runs.repo.js"
import type { DriverDeps } from "../actors/run-driver.js"
import type { VoiceRuntime } from "../voice/voice-runtime.js"
import type { CallMoney } from "./call-money.js"
import type { DialLimitsCache } from "./dial-limits-cache.js"
import { demoDialerSettings, simDialerSettings } from "./dial-settings.js"
import { busWebhookChannel } from "./telco-channel.js"

/** What every run driven in this process shares. */
export type SharedDeps = Omit<DriverDeps, "limits" | "money" | "telephony" | "llm" | "carrierKey">

export interface RunProviders {
  /** A workspace's providers now (the hang-up sweep reaches each workspace's carrier through it too). */
  readonly providersFor: (tenantId: number) => Promise<TenantProviders>
  /** A claimed run's dependencies: the shared ones with its own providers, money, settings and limits. */
  readonly depsFor: (claimed: ClaimedRun, setup: RunSetup) => Promise<DriverDeps>
}

export const runProviders = (d: {
  readonly config: Config
  readonly credentials: CredentialsService
  readonly sql: Sql
  readonly bus: BusClient
  readonly log: Logger
  readonly clock: WallClock
  readonly platformTelephony: TelephonyProvider
  readonly platformLlm: LanguageModel
  readonly deps: SharedDeps
  readonly limits: DialLimitsCache
  readonly money: CallMoney
  /** Calls heard as audio: the simulated carrier bridges answered calls to media streams (MEDIA_STREAMS=all). */
  readonly voice?: VoiceRuntime
}): RunProviders => {
  const { config, sql, clock, deps, money } = d
  const { free } = money
  const loadLimits = d.limits.load
  const carrierKey = d.limits.carrierKey
  const simMedia = d.voice?.simMedia
  /** The sim carrier at each campaign time scale in use (a campaign's calls never go out on a telco). */
  const simCarriers = new Map<number, TelephonyProvider>()
  const simCarrier = (timeScale: number): TelephonyProvider => {
    let t = simCarriers.get(timeScale)
    if (t === undefined)
      simCarriers.set(
        timeScale,
        (t = makeSimTelephony({ timeScale, ...(simMedia !== undefined && { media: simMedia }) })),
      )
    return t
  }
  // The platform's simulator speaks on media streams too when they are on for it.
  const platformTelephony =
    simMedia !== undefined && d.platformTelephony.name === "sim" ? simCarrier(config.simTimeScale) : d.platformTelephony
  const providersFor = providerResolver({
    config,
    credentials: d.credentials,
    platformTelephony,
    platformLlm: d.platformLlm,
    channel: busWebhookChannel(d.bus, d.log),
    ...(d.voice?.carrierStreams !== undefined && { mediaStreams: d.voice.carrierStreams }),
    log: d.log,
    terms: (tenantId) => callTerms(sql, tenantId, clock.now(), config.telcoA !== undefined),
  })
  const demoSettings = demoDialerSettings(deps.settings)
  const simSettings = (timeScale: number) => simDialerSettings(deps.settings, config, timeScale)
  const depsFor = async (claimed: ClaimedRun, setup: RunSetup): Promise<DriverDeps> => {
    const providers = await providersFor(claimed.tenant_id)
    const limits = await loadLimits(claimed.tenant_id)
    let runDeps: DriverDeps
    if (setup.kind === "rehearsal") {
      // A rehearsal: the sim carrier whatever accounts the workspace has, the workspace's language
      // model as its real runs use, nothing reserved or charged, and no carrier pacing to share.
      const timeScale = setup.sim_time_scale ?? config.simTimeScale
      runDeps = {
        ...deps,
        limits,
        settings: simSettings(timeScale),
        money: free,
        telephony: simCarrier(timeScale),
        llm: providers.llm,
        carrierKey: "sim",
      }
    } else {
      const demo = setup.kind === "demo"
      runDeps = {
        ...deps,
        limits,
        ...(demo && { settings: demoSettings }),
        money: demo ? free : providers.byok ? money.own : money.platform,
        telephony: providers.telephony,
        llm: providers.llm,
        carrierKey: carrierKey(providers.carrierAccount),
      }
    }
    return runDeps
  }
  return { providersFor, depsFor }
}
