// POST /demo/call: a stranger asks Parley to call them. The number is checked (libphonenumber, the
// countries Parley serves, no premium or toll-free lines), the challenge, the per-IP and per-number
// day caps and the do-not-call rules are applied, and the call becomes a real run of its own in the
// platform's demo workspace: a one-target workflow with the fixed demo rule book, woken like any run.
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { parsePhoneNumberFromString } from "libphonenumber-js/max"
import { insertTarget } from "../audience/audience.repo.js"
import { Challenge } from "../auth/Challenge.js"
import { COOLDOWN_MS, checkDnc } from "../compliance/dnc.service.js"
import { type TenantCountry, toE164 } from "../phones/phone.js"
import { AppConfig } from "../platform/AppConfig.js"
import { type Bus, publishOrWarn } from "../platform/Bus.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import { type BadRequest, RateLimited, ValidationFailed } from "../platform/errors.js"
import type { Log } from "../platform/Log.js"
import { oncePerDatabase } from "../platform/per-database.js"
import { hit } from "../platform/rate-counters.repo.js"
import { RT_RUN_WAKE, type RunControl } from "../platform/subjects.js"
import { insertRun } from "../runs/runs.repo.js"
import { addressBucket } from "../voices/previews.service.js"
import { insertRuleBookVersion, insertWorkflow, setCompliance, setWorkflowStatus } from "../workflows/workflows.repo.js"
import { insertTenant } from "../workspaces/workspaces.repo.js"
import { tokenHash } from "./demo.feed.js"
import * as repo from "./demo.repo.js"
import { defaultDemoPersona, demoRuleBook } from "./demo.rulebook.js"

/** The demo workspace: its name is the {company} the agent says it calls from. */
const DEMO_WORKSPACE = { name: "Parley", country: "US", currency: "USD" } as const
/** Numbers without a country code are read as the demo workspace's country's. */
const DEMO_COUNTRY: TenantCountry = DEMO_WORKSPACE.country
/** Where a demo call may go: the countries Parley serves. */
export const DEMO_COUNTRIES: readonly string[] = ["IN", "US", "GB", "AU", "CA", "SG", "AE"]
/** Lines a person answers; premium-rate, shared-cost, toll-free, pager and the like are refused. */
const CALLABLE_TYPES: ReadonlySet<string | undefined> = new Set(["MOBILE", "FIXED_LINE", "FIXED_LINE_OR_MOBILE"])
const DAY_MS = 86_400_000

/** The demo workspace's tenant id (one per database), created once, across processes, on first use. */
export const demoWorkspace: Effect.Effect<number, never, Db | Clock> = Effect.gen(function* () {
  const { sql } = yield* Db
  const clock = yield* Clock
  return yield* Effect.promise(() => demoWorkspaceOf(sql, clock.now()))
})

const demoWorkspaceOf = oncePerDatabase(
  (sql: Sql, now: Date) =>
    sql.begin(async (tx) => {
      await repo.lockDemoWorkspace(tx)
      const existing = await repo.findDemoWorkspace(tx)
      if (existing !== undefined) return existing
      // No wallet and no trial: the runtime bills its calls to nobody (runtime/host/run-providers.ts).
      const tenant = await insertTenant(tx, { ...DEMO_WORKSPACE, trialExpiresAt: now })
      await repo.markDemoWorkspace(tx, tenant.id)
      return tenant.id
    }) as Promise<number>,
)

const phoneInvalid = (message: string) =>
  new ValidationFailed({ message: `phone: ${message}`, errors: [{ field: "phone", message }] })

/** The number as E.164 with its country, or why a demo cannot call it (422 on phone). */
export function demoNumber(raw: string): { e164: string; country: string } | ValidationFailed {
  const r = toE164(raw, DEMO_COUNTRY)
  if (!r.ok) return phoneInvalid(`must be a valid phone number with its country code (${r.reason})`)
  const parsed = parsePhoneNumberFromString(r.e164)
  const country = parsed?.country
  if (country === undefined || !DEMO_COUNTRIES.includes(country))
    return phoneInvalid(`demo calls go only to numbers in ${DEMO_COUNTRIES.join(", ")}`)
  if (!CALLABLE_TYPES.has(parsed?.getType()))
    return phoneInvalid("must be a mobile or landline number (not premium-rate, toll-free or shared-cost)")
  return { e164: r.e164, country }
}

/** Counts a request against a day budget; RateLimited with the window's end once it is spent. */
export const spendDayBudget = (key: string, limit: number, message: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const verdict = yield* Effect.promise(() => hit(sql, key, { limit, windowMs: DAY_MS }, clock.now()))
    if (!verdict.allowed)
      return yield* Effect.fail(new RateLimited({ message, retryAfterSeconds: verdict.retryAfterSeconds }))
  })

/**
 * The rules every workspace's dialer applies, asked before the call is queued so the visitor hears
 * why: the demo workspace's DNC list and the national registry (422 on phone), the 7-day
 * cool-down (429 until it ends). The dialer applies them again when it dials.
 */
const screen = (tenantId: number, e164: string) =>
  Effect.gen(function* () {
    const check = yield* checkDnc(tenantId, e164).pipe(Effect.orDie)
    if (check.on_dnc || check.on_ncpr)
      return yield* Effect.fail(
        phoneInvalid(
          check.on_dnc
            ? "this number has asked not to get demo calls"
            : "this number is on the national do-not-call registry",
        ),
      )
    if (!check.in_cooldown) return
    const { sql } = yield* Db
    const clock = yield* Clock
    const last = yield* Effect.promise(() => repo.lastContactedAt(sql, tenantId, e164))
    const wait = last === undefined ? DAY_MS : last.getTime() + COOLDOWN_MS - clock.nowMs()
    return yield* Effect.fail(
      new RateLimited({
        message: "this number had a call in the last 7 days; a number gets one demo call a week",
        retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)),
      }),
    )
  })

export interface DemoCallRequest {
  readonly phone: string
  readonly name?: string | undefined
  readonly persona?: string | undefined
  readonly altcha?: string | undefined
  /** The client's address (its IPv6 /64): the per-IP cap's key. */
  readonly ip: string
}

export interface DemoCallAccepted {
  readonly call_id: number
  readonly status: "queued"
  /** The feed's only credential: 256 random bits, base64url; only its SHA-256 is stored. */
  readonly feed_token: string
  readonly expires_at: string
}

/**
 * Queues a demo call: 422 for a number a demo cannot call, 400 for a missing or wrong challenge
 * (ALTCHA_REQUIRED), 429 past the caps or within the cool-down, then a run of its own, woken.
 */
export const placeDemoCall = (
  input: DemoCallRequest,
): Effect.Effect<
  DemoCallAccepted,
  ValidationFailed | BadRequest | RateLimited,
  Db | Clock | AppConfig | Bus | Log | Challenge
> =>
  Effect.gen(function* () {
    const number = demoNumber(input.phone)
    if (number instanceof ValidationFailed) return yield* Effect.fail(number)
    yield* Challenge.require(input.altcha)
    const config = yield* AppConfig
    const caps = config.demo
    yield* spendDayBudget(
      `demo:call:ip:${addressBucket(input.ip)}`,
      caps.callsPerIpDay,
      `at most ${caps.callsPerIpDay} demo calls a day from one address; try again later`,
    )
    yield* spendDayBudget(
      `demo:call:number:${number.e164}`,
      caps.callsPerNumberDay,
      `at most ${caps.callsPerNumberDay} demo calls a day to one number; try again later`,
    )
    const tenantId = yield* demoWorkspace
    yield* screen(tenantId, number.e164)

    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const persona = input.persona ?? defaultDemoPersona(number.country)
    const book = demoRuleBook(persona, DEMO_WORKSPACE.currency, caps.maxCallSeconds)
    const token = randomBytes(32).toString("base64url")
    const expiresAt = new Date(now.getTime() + caps.feedTtlSeconds * 1000)
    const placed = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const workflowId = await insertWorkflow(tx, {
            kind: "demo",
            tenantId,
            name: "Public demo call",
            persona,
            nlPrompt: "",
            isTest: false,
            authorUserId: null,
            createdByUserId: null,
          })
          // The callee asked for this call themselves, on the website.
          await setCompliance(tx, workflowId, { basis: "public_demo_request", requested_at: now.toISOString() })
          const ruleBook = await insertRuleBookVersion(tx, {
            tenantId,
            workflowId,
            body: book,
            source: "edited",
            nlPrompt: null,
            model: null,
            userId: null,
          })
          await insertTarget(tx, { tenantId, workflowId, phone: number.e164, name: input.name ?? null })
          await setWorkflowStatus(tx, workflowId, "live")
          const run = await insertRun(tx, tenantId, workflowId, ruleBook.id)
          const id = await repo.insertDemoCall(tx, {
            tokenSha256: tokenHash(token),
            runId: run.id,
            persona,
            createdAt: now,
            expiresAt,
          })
          return { id, runId: run.id }
        }) as Promise<{ id: number; runId: number }>,
    )
    // Best effort, as for any run: runtime processes also look for unowned runs every second.
    const wake: RunControl = { run_id: placed.runId, tenant_id: tenantId, command: "start" }
    yield* publishOrWarn(RT_RUN_WAKE, wake, "demo call wake-up not sent")
    return { call_id: placed.id, status: "queued", feed_token: token, expires_at: expiresAt.toISOString() }
  })
