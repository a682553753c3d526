// Which provider accounts a tenant's run uses: a byok tenant's own validated account for each leg it
// has one for, the platform's for the rest (telco_a when TELCO_A_* is configured, else the sim).
// Only a run with every paid leg its own, on byok terms (src/billing/call-terms.ts), calls unbilled.
import type { Logger } from "pino"
import type { CallTerms } from "../src/billing/call-terms.js"
import type { Config } from "../src/platform/config.js"
import type { CredentialsService } from "../src/onboarding/Credentials.js"
import type { LanguageModel } from "../src/providers/llm/llm.interface.js"
import { makeOpenAiLlm } from "../src/providers/llm/openai.llm.js"
import { outboundFor } from "../src/providers/outbound.js"
import { makeTelcoATelephony, type WebhookChannel } from "../src/providers/telephony/telco-a.telephony.js"
import type { TelephonyProvider } from "../src/providers/telephony/telephony.interface.js"

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
  readonly credentials: CredentialsService
  readonly platformTelephony: TelephonyProvider
  readonly platformLlm: LanguageModel
  readonly channel: WebhookChannel
  readonly log: Logger
  /** The workspace's terms now (callTerms against the deployment's database). */
  readonly terms: (tenantId: number) => Promise<CallTerms>
}

/** The base URL the provider calls our webhooks at. */
const webhookBase = (config: Config) => config.publicBaseUrl ?? `http://127.0.0.1:${config.port}`

export function providerResolver(d: AccountDeps): (tenantId: number) => Promise<TenantProviders> {
  // One adapter per account, shared by every run on it.
  const telcoA = new Map<string, TelephonyProvider>()
  const telcoAFor = (account: { sid: string; token: string; apiUrl: string; callerId: string | null }) => {
    const key = `${account.apiUrl}|${account.sid}|${account.token}`
    let t = telcoA.get(key)
    // An API root other than TELCO_A_API_URL came from the tenant's credential: guarded at connect.
    const outbound = outboundFor(d.config, account.apiUrl === d.config.telcoA?.apiUrl ? "platform" : "tenant")
    if (t === undefined) telcoA.set(key, (t = makeTelcoATelephony({ account, publicBaseUrl: webhookBase(d.config), channel: d.channel, outbound })))
    return t
  }
  const platform = (): Pick<TenantProviders, "telephony" | "carrierAccount"> =>
    d.config.telcoA !== undefined
      ? {
          telephony: telcoAFor({ sid: d.config.telcoA.accountSid, token: d.config.telcoA.authToken, apiUrl: d.config.telcoA.apiUrl, callerId: d.config.telcoACallerId ?? null }),
          carrierAccount: `telco_a:${d.config.telcoA.accountSid}`,
        }
      : { telephony: d.platformTelephony, carrierAccount: d.platformTelephony.name }

  return async (tenantId) => {
    const [terms, telco, llm] = await Promise.all([d.terms(tenantId), d.credentials.active(tenantId, "telco_a"), d.credentials.active(tenantId, "llm")])
    const apiUrl = typeof telco?.extra["api_base_url"] === "string" ? (telco.extra["api_base_url"] as string) : d.config.telcoA?.apiUrl
    const own =
      telco !== undefined && telco.primaryId !== null && apiUrl !== undefined
        ? {
            telephony: telcoAFor({ sid: telco.primaryId, token: telco.secret, apiUrl, callerId: typeof telco.extra["caller_id"] === "string" ? (telco.extra["caller_id"] as string) : null }),
            carrierAccount: `telco_a:${telco.primaryId}`,
          }
        : undefined
    const ownBase = typeof llm?.extra["base_url"] === "string" ? (llm.extra["base_url"] as string) : undefined
    const ownLlm =
      llm !== undefined
        ? makeOpenAiLlm({
            baseUrl: ownBase ?? d.config.llmBaseUrl ?? "https://api.openai.com/v1",
            apiKey: llm.secret,
            model: typeof llm.extra["model"] === "string" ? (llm.extra["model"] as string) : d.config.llmModel,
            timeoutMs: d.config.llmTimeoutMs,
            // The credential's own base URL is the tenant's: connect-time address guard.
            outbound: outboundFor(d.config, ownBase === undefined ? "platform" : "tenant"),
          })
        : undefined
    // A leg the workspace has no account for goes on the platform's; then the call is paid for.
    return { ...(own ?? platform()), llm: ownLlm ?? d.platformLlm, byok: terms.billing === "byok" && own !== undefined && ownLlm !== undefined }
  }
}
