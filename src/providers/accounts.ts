// Whose provider account a workspace's work goes on, decided here and nowhere else: the platform's
// (TELCO_A_* and LLM_* when configured, else the simulators) or a byok workspace's own, from its
// validated credential. The deployment's services (Llm.ts, Telephony.ts), the numbers a workspace
// buys (src/numbers) and the accounts a run's calls use (runtime) all ask this module.
// Credentials and billing terms come in as plain functions: providers know no domain.
import type { Logger } from "pino"
import type { Config } from "../platform/config.js"
import type { LanguageModel } from "./llm/llm.interface.js"
import { makeOpenAiLlm } from "./llm/openai.llm.js"
import { makeSimLlm } from "./llm/sim.llm.js"
import { outboundFor } from "./outbound.js"
import type { NumberInventory } from "./telephony/numbers.interface.js"
import { makeSimNumbers } from "./telephony/sim.numbers.js"
import { makeSimTelephony } from "./telephony/sim.telephony.js"
import { makeTelcoANumbers, type TelcoAOptions } from "./telephony/telco-a.numbers.js"
import { makeTelcoATelephony, type WebhookChannel } from "./telephony/telco-a.telephony.js"
import type { MediaStreams, TelephonyProvider } from "./telephony/telephony.interface.js"

/** platform: Parley's own account; tenant: the workspace's (byok). */
export type AccountOwner = "platform" | "tenant"

/** A validated credential as the credential store hands it over (src/onboarding/Credentials.ts). */
export interface ProviderCredential {
  /** telco_a: the account SID; llm: the organisation id (OpenAI-Organization); null when not given. */
  readonly primaryId: string | null
  readonly secret: string
  /** The credential's extra fields as saved (base_url, model, api_base_url, caller_id). */
  readonly extra: Readonly<Record<string, unknown>>
}

/** A byok workspace's validated credential for a provider; undefined when it has none. */
export interface CredentialSource {
  active(tenantId: number, provider: "telco_a" | "llm"): Promise<ProviderCredential | undefined>
}

const extraString = (c: ProviderCredential, key: string): string | undefined =>
  typeof c.extra[key] === "string" ? (c.extra[key] as string) : undefined

// --- the platform's accounts ----------------------------------------------------------------

/** The deployment's model: LLM_BASE_URL's OpenAI-compatible API, else the simulator; `fetch` for tests. */
export function makeLlm(
  config: Pick<Config, "llmBaseUrl" | "llmApiKey" | "llmModel" | "llmTimeoutMs"> &
    Partial<Pick<Config, "providerResponseLimitBytes" | "simLlm">>,
  options: { fetch?: typeof fetch } = {},
): LanguageModel {
  if (config.llmBaseUrl === undefined) return makeSimLlm(config.simLlm)
  return makeOpenAiLlm({
    baseUrl: config.llmBaseUrl,
    apiKey: config.llmApiKey,
    model: config.llmModel,
    timeoutMs: config.llmTimeoutMs,
    // LLM_BASE_URL is the operator's own (it may be private): the answer cap, no address guard.
    ...(config.providerResponseLimitBytes !== undefined && {
      outbound: { responseLimitBytes: config.providerResponseLimitBytes },
    }),
    ...(options.fetch !== undefined && { fetch: options.fetch }),
  })
}

/**
 * The deployment's telephony service: the simulator at SIM_TIME_SCALE. Calls on the platform's
 * telco_a account (TELCO_A_*) go through providerResolver, which builds that adapter per account.
 */
export function makeTelephony(config: Pick<Config, "simTimeScale">): TelephonyProvider {
  return makeSimTelephony({ timeScale: config.simTimeScale })
}

// --- telco_a accounts and the numbers on them -----------------------------------------------

/** A telco_a account: its SID, auth token and API root. */
export interface TelcoAccount {
  readonly sid: string
  readonly token: string
  readonly apiUrl: string
}

/** A byok workspace's own telco_a account, or undefined when it has no usable credential. */
export type TelcoAccountResolver = (tenantId: number) => Promise<TelcoAccount | undefined>

/**
 * The telco_a account a credential names: its API root is the credential's extra.api_base_url,
 * else the platform's TELCO_A_API_URL; undefined without an account SID or an API root.
 */
export function telcoAccountOf(
  credential: ProviderCredential | undefined,
  config: Pick<Config, "telcoA">,
): (TelcoAccount & { readonly callerId: string | null }) | undefined {
  if (credential === undefined) return undefined
  const apiUrl = extraString(credential, "api_base_url") ?? config.telcoA?.apiUrl
  if (credential.primaryId === null || apiUrl === undefined) return undefined
  const callerId = extraString(credential, "caller_id") ?? null
  return { sid: credential.primaryId, token: credential.secret, apiUrl, callerId }
}

/** A byok workspace's telco_a account from the credential store (what NumberAccounts.byokTelcoA wants). */
export const telcoAccountResolver =
  (credentials: CredentialSource, config: Pick<Config, "telcoA">): TelcoAccountResolver =>
  async (tenantId) => {
    const account = telcoAccountOf(await credentials.active(tenantId, "telco_a"), config)
    return account === undefined ? undefined : { sid: account.sid, token: account.token, apiUrl: account.apiUrl }
  }

/** The account a workspace's numbers are bought on and released from. */
export interface NumberAccount {
  readonly owner: AccountOwner
  /** The account's identifier (telco_a account sid); null for the simulator. */
  readonly ref: string | null
  readonly inventory: NumberInventory
}

type NumbersConfig = Pick<Config, "telcoA" | "allowPrivateProviderUrls" | "providerResponseLimitBytes">

/** The platform's numbers: its telco_a account (TELCO_A_*), or the simulator when that is not configured. */
export const platformNumberAccount = (config: NumbersConfig, options?: TelcoAOptions): NumberAccount =>
  config.telcoA === undefined
    ? { owner: "platform", ref: null, inventory: makeSimNumbers() }
    : {
        owner: "platform",
        ref: config.telcoA.accountSid,
        inventory: makeTelcoANumbers(config.telcoA, { outbound: outboundFor(config, "platform"), ...options }),
      }

/** A byok workspace's numbers, on its own telco_a account. */
export const tenantNumberAccount = (
  account: TelcoAccount,
  config: NumbersConfig,
  options?: TelcoAOptions,
): NumberAccount => ({
  owner: "tenant",
  ref: account.sid,
  inventory: makeTelcoANumbers(
    { apiUrl: account.apiUrl, accountSid: account.sid, authToken: account.token },
    // An API root other than TELCO_A_API_URL came from the tenant's credential: guarded at connect.
    { outbound: outboundFor(config, account.apiUrl === config.telcoA?.apiUrl ? "platform" : "tenant"), ...options },
  ),
})

/** A byok workspace's own model, from its validated llm credential (base_url and model in extra). */
export function ownLlmOf(llm: ProviderCredential, config: Config): LanguageModel {
  const ownBase = extraString(llm, "base_url")
  return makeOpenAiLlm({
    baseUrl: ownBase ?? config.llmBaseUrl ?? "https://api.openai.com/v1",
    apiKey: llm.secret,
    organization: llm.primaryId,
    model: extraString(llm, "model") ?? config.llmModel,
    timeoutMs: config.llmTimeoutMs,
    // The credential's own base URL is the tenant's: connect-time address guard.
    outbound: outboundFor(config, ownBase === undefined ? "platform" : "tenant"),
  })
}

// --- a run's accounts -----------------------------------------------------------------------

export interface TenantProviders {
  readonly telephony: TelephonyProvider
  readonly llm: LanguageModel
  /** The carrier account calls go out on: pacing is per carrier account. */
  readonly carrierAccount: string
  /** true: every paid leg is the workspace's own, so its calls hold nothing at the per-minute rate. */
  readonly byok: boolean
}

export interface AccountDeps {
  readonly config: Config
  readonly credentials: CredentialSource
  readonly platformTelephony: TelephonyProvider
  readonly platformLlm: LanguageModel
  readonly channel: WebhookChannel
  /** Calls heard as audio (MEDIA_STREAMS): where telco_a's answered calls connect their media streams. */
  readonly mediaStreams?: MediaStreams
  readonly log: Logger
  /** The workspace's billing terms now (callTerms in src/billing, injected by the runtime). */
  readonly terms: (tenantId: number) => Promise<{ readonly billing: "bundled" | "byok" }>
}

/** The base URL the provider calls our webhooks at. */
const webhookBase = (config: Config) => config.publicBaseUrl ?? `http://127.0.0.1:${config.port}`

/**
 * The accounts a tenant's run uses: a byok tenant's own validated account for each leg it has one
 * for, the platform's for the rest (telco_a when TELCO_A_* is configured, else the simulator). Only
 * a run with every paid leg its own, on byok terms, calls unbilled.
 */
export function providerResolver(d: AccountDeps): (tenantId: number) => Promise<TenantProviders> {
  // One adapter per account, shared by every run on it.
  const telcoA = new Map<string, TelephonyProvider>()
  const telcoAFor = (account: TelcoAccount & { readonly callerId: string | null }): TelephonyProvider => {
    const key = `${account.apiUrl}|${account.sid}|${account.token}`
    let t = telcoA.get(key)
    // An API root other than TELCO_A_API_URL came from the tenant's credential: guarded at connect.
    const outbound = outboundFor(d.config, account.apiUrl === d.config.telcoA?.apiUrl ? "platform" : "tenant")
    if (t === undefined) {
      t = makeTelcoATelephony({
        account,
        publicBaseUrl: webhookBase(d.config),
        channel: d.channel,
        outbound,
        ...(d.mediaStreams !== undefined && { mediaStreams: d.mediaStreams }),
      })
      telcoA.set(key, t)
    }
    return t
  }
  const platform = (): Pick<TenantProviders, "telephony" | "carrierAccount"> => {
    const t = d.config.telcoA
    if (t === undefined) return { telephony: d.platformTelephony, carrierAccount: d.platformTelephony.name }
    const callerId = d.config.telcoACallerId ?? null
    const account = { sid: t.accountSid, token: t.authToken, apiUrl: t.apiUrl, callerId }
    return { telephony: telcoAFor(account), carrierAccount: `telco_a:${t.accountSid}` }
  }
  const ownLlm = (llm: ProviderCredential): LanguageModel => ownLlmOf(llm, d.config)

  return async (tenantId) => {
    const [terms, telco, llm] = await Promise.all([
      d.terms(tenantId),
      d.credentials.active(tenantId, "telco_a"),
      d.credentials.active(tenantId, "llm"),
    ])
    const account = telcoAccountOf(telco, d.config)
    const own =
      account === undefined ? undefined : { telephony: telcoAFor(account), carrierAccount: `telco_a:${account.sid}` }
    const model = llm === undefined ? undefined : ownLlm(llm)
    // A leg the workspace has no account for goes on the platform's; then the call is paid for.
    const byok = terms.billing === "byok" && own !== undefined && model !== undefined
    return { ...(own ?? platform()), llm: model ?? d.platformLlm, byok }
  }
}
