// GET /billing/balance, /billing/precheck and /billing/history: the wallet as its owner sees it.
import { Effect } from "effect"
import { z } from "zod"
import { balance, DEFAULT_PRECHECK_SECONDS, history, precheckExact } from "../../src/billing/wallet.service.js"
import { bytes, json } from "../reply.js"
import { route } from "../route.js"
import { QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"
import { sharedJson } from "../shared-read.js"

export const billingBalance = route({
  method: "GET",
  path: "/billing/balance",
  auth: "jwt",
  cached: true,
  summary: "The wallet: balance, rate, minutes remaining, autocharge and top-up presets",
  tags: ["billing"],
  handler: ({ principal }) =>
    // A dashboard's polls share one read (api/shared-read.ts).
    Effect.flatMap(callerOf(principal), (c) => sharedJson(`billing.balance:${c.tenantId}`, balance(c.tenantId))),
})

/** Any positive whole number of seconds (the spec sets no maximum), read exactly. */
const Seconds = z
  .string()
  .regex(/^0*[1-9]\d*$/, "must be a positive whole number of seconds")
  .transform((v) => BigInt(v))

/** JSON with bigints written as exact integer literals (JSON numbers have no size limit). */
const exactJson = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? `\u0000big:${v}\u0000` : v)).replace(
    /"\\u0000big:(\d+)\\u0000"/g,
    "$1",
  )

export const billingPrecheck = route({
  method: "GET",
  path: "/billing/precheck",
  auth: "jwt",
  summary:
    "Whether the wallet can pay for a call of expected_seconds (any positive whole number; default 180): " +
    "insufficient_funds when it cannot",
  tags: ["billing"],
  query: z.object({ expected_seconds: Seconds.optional() }),
  handler: ({ principal, query }) =>
    Effect.flatMap(callerOf(principal), (c) =>
      Effect.map(precheckExact(c.tenantId, query.expected_seconds ?? BigInt(DEFAULT_PRECHECK_SECONDS)), (r) =>
        bytes("application/json; charset=utf-8", exactJson(r)),
      ),
    ),
})

export const billingHistory = route({
  method: "GET",
  path: "/billing/history",
  auth: "jwt",
  summary: "Ledger entries, newest first (limit default 50, at most 200; page with before)",
  tags: ["billing"],
  query: z.object({ limit: QueryInt(1, 200).optional(), before: QueryInt(1, Number.MAX_SAFE_INTEGER).optional() }),
  handler: ({ principal, query }) =>
    Effect.flatMap(callerOf(principal), (c) =>
      Effect.map(history(c.tenantId, query.limit ?? 50, query.before), (r) => json(r)),
    ),
})
