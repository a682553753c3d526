// GET /billing/balance, /billing/precheck and /billing/history: the wallet as its owner sees it.
import { Effect } from "effect"
import { z } from "zod"
import { balance, DEFAULT_PRECHECK_SECONDS, history, precheck } from "../../src/billing/wallet.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { QueryInt } from "../schemas.js"
import { callerOf } from "../session.js"

export const billingBalance = route({
  method: "GET",
  path: "/billing/balance",
  auth: "jwt",
  summary: "The wallet: balance, rate, minutes remaining, autocharge and top-up presets",
  tags: ["billing"],
  handler: ({ principal }) =>
    Effect.flatMap(callerOf(principal), (c) => Effect.map(balance(c.tenantId), (w) => json(w))),
})

export const billingPrecheck = route({
  method: "GET",
  path: "/billing/precheck",
  auth: "jwt",
  summary: "Whether the wallet can pay for a call of expected_seconds (default 180)",
  tags: ["billing"],
  query: z.object({ expected_seconds: QueryInt(1, 86_400).optional() }),
  handler: ({ principal, query }) =>
    Effect.flatMap(callerOf(principal), (c) =>
      Effect.map(precheck(c.tenantId, query.expected_seconds ?? DEFAULT_PRECHECK_SECONDS), (r) => json(r)),
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
