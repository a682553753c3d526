// byok is the tenant's own providers, never free calls: precheck, the reservation and the
// runtime's choice of accounts agree through callTerms — a call holds nothing only with every paid
// leg on the workspace's own validated accounts and its platform-fee subscription active.
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import pino from "pino"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CallTerms, callTerms } from "../../src/billing/call-terms.js"
import { reserveCall } from "../../src/billing/usage.service.js"
import { callCostMinor, precheck } from "../../src/billing/wallet.service.js"
import type { AppServices } from "../../src/main/app.layer.js"
import type { ActiveCredential, CredentialsService } from "../../src/onboarding/Credentials.js"
import { loadConfig } from "../../src/platform/config.js"
import { providerResolver } from "../../src/providers/accounts.js"
import type { LanguageModel } from "../../src/providers/llm/llm.interface.js"
import type { TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import { api, type Session } from "../support/clients.js"
import { sharedTestServer, type TestServer } from "../support/harness.js"

let srv: TestServer
let a: ReturnType<typeof api>
const run = <A, E>(eff: Effect.Effect<A, E, AppServices>) => srv.running.runtime.runPromise(Effect.either(eff))

beforeAll(async () => {
  srv = await sharedTestServer()
  a = api(srv)
})
afterAll(async () => srv?.stop())

const balanceOf = async (tenantId: number) =>
  (await srv.sql<[{ balance_minor: number }]>`select balance_minor from wallets where tenant_id = ${tenantId}`)[0]
    .balance_minor

async function byokTenant(
  opts: { subscription?: "active" | "lapsed" | "none"; telco?: boolean; llm?: boolean; balance?: number } = {},
): Promise<Session> {
  const s = await a.signup({ country: "US" })
  await srv.sql`update tenants set onboarding_mode = 'byok' where id = ${s.tenantId}`
  if (opts.balance !== undefined)
    await srv.sql`update wallets set balance_minor = ${opts.balance} where tenant_id = ${s.tenantId}`
  const sub = opts.subscription ?? "active"
  if (sub !== "none") {
    const end = sub === "active" ? new Date(Date.now() + 86_400_000) : new Date(Date.now() - 60_000)
    await srv.sql`
      insert into subscriptions (tenant_id, status, amount_minor, currency, external_id, short_url,
        current_period_start, current_period_end)
      values (${s.tenantId}, 'active', 100, 'USD', ${`sub_${randomBytes(6).toString("hex")}`},
        'http://x/', now() - interval '1 day', ${end})`
  }
  // Rows as a validated save leaves them; callTerms reads status and shape, not the secret.
  if (opts.telco ?? true)
    await srv.sql`
      insert into provider_credentials (tenant_id, provider, primary_id, secret_enc, extra, hint, status, validated_at)
      values (${s.tenantId}, 'telco_a', 'AC123', 'v1:AAAA',
        ${srv.sql.json({ api_base_url: "https://telco.example" })}, '…1234', 'validated', now())`
  if (opts.llm ?? true)
    await srv.sql`
      insert into provider_credentials (tenant_id, provider, secret_enc, hint, status, validated_at)
      values (${s.tenantId}, 'llm', 'v1:AAAA', '…1234', 'validated', now())`
  return s
}

describe("precheck and reservation", () => {
  it("a byok workspace with no credentials and an empty wallet is refused, not free", async () => {
    const s = await byokTenant({ subscription: "none", telco: false, llm: false, balance: 0 })
    const pre = (await (await a.call("GET", "/billing/precheck", { token: s.token })).json()) as Record<string, unknown>
    expect(pre).toMatchObject({
      status: "insufficient_funds",
      billing: "bundled",
      required_minor: callCostMinor(180, "USD"),
    })
    expect(pre["byok_missing"]).toEqual(["byok_subscription", "telephony_credential", "llm_credential"])
    const r = await run(reserveCall(s.tenantId, `call:t${s.tenantId}`, 180, { onOwnAccounts: true }))
    expect(r._tag).toBe("Left")
    expect(await srv.sql`select 1 from usage_reservations where tenant_id = ${s.tenantId}`).toHaveLength(0)
  })

  it("a byok workspace without an active subscription pays the bundled rate, even on its own accounts", async () => {
    for (const subscription of ["none", "lapsed"] as const) {
      const s = await byokTenant({ subscription })
      const before = await balanceOf(s.tenantId)
      const r = await run(reserveCall(s.tenantId, `call:s${s.tenantId}`, 180, { onOwnAccounts: true }))
      expect(r._tag).toBe("Right")
      const held = callCostMinor(180, "USD")
      expect(r._tag === "Right" && r.right.reserved_minor).toBe(held)
      expect(await balanceOf(s.tenantId)).toBe(before - held)
      expect(await run(precheck(s.tenantId, 180))).toMatchObject({
        _tag: "Right",
        right: { billing: "bundled", byok_missing: ["byok_subscription"] },
      })
    }
  })

  it("a byok workspace missing the language model's credential pays", async () => {
    const s = await byokTenant({ llm: false })
    const r = await run(reserveCall(s.tenantId, `call:l${s.tenantId}`, 60, { onOwnAccounts: true }))
    expect(r._tag === "Right" && r.right.reserved_minor).toBe(callCostMinor(60, "USD"))
  })

  it(
    "a complete byok workspace holds nothing for calls on its own accounts, " + "and pays for calls on the platform's",
    async () => {
      const s = await byokTenant({ balance: 0 })
      expect(await run(precheck(s.tenantId, 180))).toMatchObject({
        _tag: "Right",
        right: { status: "ok", billing: "byok", required_minor: 0 },
      })
      const own = await run(reserveCall(s.tenantId, `call:o${s.tenantId}`, 180, { onOwnAccounts: true }))
      expect(own._tag === "Right" && own.right.reserved_minor).toBe(0)
      // A run that resolved the platform's accounts (before the workspace was ready) still pays.
      const platform = await run(reserveCall(s.tenantId, `call:p${s.tenantId}`, 180, { onOwnAccounts: false }))
      expect(platform._tag).toBe("Left")
    },
  )

  it("bundled workspaces are bundled whatever rows they have", async () => {
    const s = await byokTenant()
    await srv.sql`update tenants set onboarding_mode = 'bundled' where id = ${s.tenantId}`
    expect(await callTerms(srv.sql, s.tenantId, new Date(), false)).toEqual({ billing: "bundled", byokMissing: [] })
  })
})

describe("the runtime's accounts", () => {
  const platformTelephony = { name: "sim" } as unknown as TelephonyProvider
  const platformLlm = { name: "sim" } as unknown as LanguageModel
  const cred = (provider: "telco_a" | "llm"): ActiveCredential => ({
    provider,
    primaryId: provider === "telco_a" ? "AC1" : null,
    secret: "s3cret-token-value",
    extra: provider === "telco_a" ? { api_base_url: "https://telco.example" } : { base_url: "https://llm.example/v1" },
  })
  const credentials = (have: Array<"telco_a" | "llm">): CredentialsService => ({
    crypto: undefined,
    active: async (_t, p) => (have.includes(p as "telco_a" | "llm") ? cred(p as "telco_a" | "llm") : undefined),
    telcoAAccount: async () => undefined,
  })
  const resolve = (have: Array<"telco_a" | "llm">, terms: CallTerms) =>
    providerResolver({
      config: loadConfig({}),
      credentials: credentials(have),
      platformTelephony,
      platformLlm,
      channel: { register: () => () => {} } as never,
      log: pino({ level: "silent" }),
      terms: async () => terms,
    })(1)

  it("calls unbilled only when every leg is the workspace's own and its terms are byok", async () => {
    const byok: CallTerms = { billing: "byok", byokMissing: [] }
    const all = await resolve(["telco_a", "llm"], byok)
    expect(all.byok).toBe(true)
    expect(all.telephony).not.toBe(platformTelephony)
    expect(all.llm).not.toBe(platformLlm)
    // Terms that say bundled (no subscription) bill the run even on the workspace's own accounts.
    expect((await resolve(["telco_a", "llm"], { billing: "bundled", byokMissing: ["byok_subscription"] })).byok).toBe(
      false,
    )
    // A leg on the platform's account is paid for.
    const telcoOnly = await resolve(["telco_a"], byok)
    expect(telcoOnly).toMatchObject({ byok: false, llm: platformLlm })
    expect((await resolve([], byok)).telephony).toBe(platformTelephony)
  })
})
