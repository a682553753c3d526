// The storefront connection: the OAuth install (a single-use state bound to the workspace and
// shop), the callback (state, hmac, code-for-token exchange, token stored encrypted, the
// `storefront` data source created or reused and fetched), status and disconnect.
import { createHash, randomBytes } from "node:crypto"
import { Effect } from "effect"
import { createSource, listSources, requestFetch, type SourceRow } from "../data/sources.repo.js"
import { credentialCryptoFor } from "../onboarding/Credentials.js"
import { AppConfig } from "../platform/AppConfig.js"
import { publishOrWarn } from "../platform/Bus.js"
import { Clock } from "../platform/Clock.js"
import { Db, isUniqueViolation, type Sql } from "../platform/Db.js"
import {
  Conflict,
  EncryptionUnavailable,
  Forbidden,
  GatewayUnavailable,
  Unauthenticated,
  ValidationFailed,
} from "../platform/errors.js"
import { DATA_SOURCE_FETCH, type DataSourceFetch } from "../platform/subjects.js"
import { iso } from "../platform/time.js"
import { storefrontAdapterFor } from "../providers/Storefront.js"
import { StorefrontRefused, verifyQueryHmac } from "../providers/storefront/storefront.interface.js"
import * as repo from "./storefront.repo.js"
import { TOKEN_AAD_PROVIDER } from "./storefront.rows.js"

/** How long an install state may be used. */
export const STATE_TTL_SECONDS = 600
/** The name the connected shop's data source gets. */
export const STOREFRONT_SOURCE_NAME = "Storefront customers"

const sha256 = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest()
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** `shop` lower-cased when it is `<name>.<platform domain>`; a 422 naming the field otherwise. */
const checkShop = (raw: string) =>
  Effect.gen(function* () {
    const { storefront } = yield* AppConfig
    const shop = raw.trim().toLowerCase()
    const re = new RegExp(`^[a-z0-9][a-z0-9-]*\\.${escapeRe(storefront.platformDomain)}$`)
    if (shop.length > 255 || !re.test(shop))
      return yield* Effect.fail(
        new ValidationFailed({
          message: "the shop is not a store address",
          errors: [{ field: "shop", message: `must be <name>.${storefront.platformDomain}` }],
        }),
      )
    return shop
  })

const cryptoOrFail = Effect.gen(function* () {
  const crypto = credentialCryptoFor(yield* AppConfig)
  if (crypto === undefined)
    return yield* Effect.fail(
      new EncryptionUnavailable({
        message: "the storefront token cannot be stored: the server has no CREDENTIALS_MASTER_KEY configured",
      }),
    )
  return crypto
})

/** GET /storefront/install: a fresh single-use state and the URL that starts the platform's approval. */
export const startInstall = (tenantId: number, shopRaw: string, redirectUri: string) =>
  Effect.gen(function* () {
    const shop = yield* checkShop(shopRaw)
    // Refused before the merchant approves anything we could not keep.
    yield* cryptoOrFail
    const { sql } = yield* Db
    const config = yield* AppConfig
    const clock = yield* Clock
    const state = randomBytes(32).toString("base64url")
    yield* Effect.promise(() =>
      repo.insertState(sql, { stateSha256: sha256(state), tenantId, shop, ttlSeconds: STATE_TTL_SECONDS }),
    )
    yield* Effect.promise(() => repo.pruneStates(sql))
    const authorizeUrl = storefrontAdapterFor(config).authorizeUrl({ shop, state, redirectUri })
    return {
      authorize_url: authorizeUrl,
      shop,
      expires_at: iso(new Date(clock.nowMs() + STATE_TTL_SECONDS * 1000)),
    }
  })

/** The workspace's storefront source, made on first connect (the partial unique index keeps it one). */
const storefrontSource = (sql: Sql, tenantId: number): Promise<SourceRow> =>
  (async () => {
    const find = async () => (await listSources(sql, tenantId)).find((s) => s.kind === "storefront")
    const existing = await find()
    if (existing !== undefined) return existing
    try {
      return await createSource(sql, {
        tenantId,
        name: STOREFRONT_SOURCE_NAME,
        kind: "storefront",
        url: null,
        status: "pending",
      })
    } catch (e) {
      // A concurrent callback made it first.
      const raced = isUniqueViolation(e) ? await find() : undefined
      if (raced === undefined) throw e
      return raced
    }
  })()

/**
 * GET /storefront/callback (public: the state is the credential). The hmac, when sent, must be
 * the platform's (401 INVALID_SIGNATURE); the state must be known, unused, unexpired and for this
 * shop (403, and a used state stays used); then the code is exchanged, the token stored encrypted,
 * and the storefront source fetched.
 */
export const completeInstall = (p: { rawQuery: string; shop: string; code: string; state: string }) =>
  Effect.gen(function* () {
    const shop = yield* checkShop(p.shop)
    const config = yield* AppConfig
    const adapter = storefrontAdapterFor(config)
    if (new URLSearchParams(p.rawQuery).has("hmac") && !verifyQueryHmac(p.rawQuery, adapter.signingSecret))
      return yield* Effect.fail(
        new Unauthenticated({ message: "the callback's hmac signature does not verify", code: "INVALID_SIGNATURE" }),
      )
    const crypto = yield* cryptoOrFail
    const { sql } = yield* Db
    const bound = yield* Effect.promise(() => repo.consumeState(sql, sha256(p.state), shop))
    if (bound === undefined)
      return yield* Effect.fail(
        new Forbidden({ message: "the install state is unknown, already used, expired, or for another shop" }),
      )
    const tenantId = bound.tenant_id
    const token = yield* Effect.tryPromise({
      try: () => adapter.exchangeCode(shop, p.code),
      catch: (e) =>
        e instanceof StorefrontRefused
          ? new Conflict({ message: e.message, code: "CREDENTIAL_REJECTED" })
          : new GatewayUnavailable({ message: e instanceof Error ? e.message : "the shop could not be reached" }),
    })
    const conn = yield* Effect.promise(() =>
      repo.upsertConnection(sql, {
        tenantId,
        shop,
        accessTokenEnc: crypto.encrypt(token.accessToken, { tenantId, provider: TOKEN_AAD_PROVIDER }),
        scopes: token.scopes.join(","),
      }),
    )
    const clock = yield* Clock
    const source = yield* Effect.promise(async () => {
      const s = await storefrontSource(sql, tenantId)
      return (await requestFetch(sql, tenantId, s.id, clock.now())) ?? s
    })
    const fetch: DataSourceFetch = { source_id: source.id, tenant_id: tenantId }
    // Best effort: POST /data/sources/{id}/fetch asks again if this message is lost.
    yield* publishOrWarn(DATA_SOURCE_FETCH, fetch, "storefront fetch not published")
    return { connected: true as const, shop: conn.shop, source_id: source.id, status: source.status }
  })

/** GET /storefront/status. */
export const connectionStatus = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const conn = yield* Effect.promise(() => repo.getConnection(sql, tenantId))
    if (conn === undefined) return { connected: false as const }
    return {
      connected: true as const,
      shop: conn.shop,
      connected_at: iso(conn.connected_at),
      scopes: conn.scopes.split(",").filter((s) => s !== ""),
    }
  })

/**
 * DELETE /storefront: forgets the token. The storefront source keeps its rows (audiences may rest
 * on them); its next fetch fails until the shop is connected again, which reuses the source.
 */
export const disconnect = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const removed = yield* Effect.promise(() => repo.deleteConnection(sql, tenantId))
    return { connected: false as const, disconnected: removed }
  })
