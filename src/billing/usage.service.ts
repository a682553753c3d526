// The usage API the call runtime uses: reserve a call's cost before dialing (never overdrawing),
// settle the connected seconds at hangup and release the rest.
import { Effect } from "effect"
import { AppConfig } from "../platform/AppConfig.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { InsufficientFunds } from "../platform/errors.js"
import { findTenantPlan } from "../workspaces/workspaces.repo.js"
import { maybeAutocharge } from "./autocharge.service.js"
import { callTerms } from "./call-terms.js"
import { callRatePerMinuteMinor, type HostedSpeechPart } from "./pricing.js"
import type { Reservation } from "./usage.repo.js"
import * as repo from "./usage.repo.js"
import { callCostMinor, loadTenant } from "./wallet.service.js"

export type { Reservation } from "./usage.repo.js"

/** What reserveCalls answers per call: held (or held before), or the balance could not pay it. */
export type BatchReservation =
  | { readonly ok: true; readonly reserved_minor: number }
  | { readonly ok: false; readonly balance_minor: number; readonly required_minor: number }

/**
 * Holds the cost of `expectedSeconds` for each of a batch of one workspace's calls of the same
 * expected length (a dial batch starting together) before they are dialed, never overdrawing:
 * one transaction for all of them, so the wallet is locked once per batch rather than once per
 * call; idempotent on each call ref (`reserve:<ref>`). Nothing is held only when the workspace's
 * terms are byok now (see call-terms.ts) AND the calls really go out on its own accounts
 * (`onOwnAccounts`: a run resolves its accounts once, so a workspace that became byok-ready mid-run
 * still pays for the calls that run places on the platform's accounts). Answers in the order of
 * `callRefs`.
 */
export const reserveCalls = (
  tenantId: number,
  callRefs: readonly string[],
  expectedSeconds: number,
  opts: { onOwnAccounts: boolean; hostedSpeech?: readonly HostedSpeechPart[] } = { onOwnAccounts: false },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const clock = yield* Clock
    const tenant = yield* loadTenant(sql, tenantId)
    const terms = yield* Effect.promise(() => callTerms(sql, tenantId, clock.now(), config.telcoA !== undefined))
    if (terms.billing === "byok" && opts.onOwnAccounts)
      return callRefs.map((): BatchReservation => ({ ok: true, reserved_minor: 0 }))
    // Hosted speech on the platform's accounts is part of the call's price (pricing.ts).
    const hostedSpeech = [...new Set(opts.hostedSpeech ?? [])].sort()
    const rate = callRatePerMinuteMinor(tenant.currency, hostedSpeech)
    const cost = callCostMinor(expectedSeconds, tenant.currency, rate)
    const byRef = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        const answers = new Map<string, BatchReservation>()
        for (const r of await repo.findReservations(tx, callRefs))
          answers.set(r.call_ref, { ok: true, reserved_minor: Number(r.reserved_minor) })
        const fresh = [...new Set(callRefs.filter((ref) => !answers.has(ref)))]
        if (fresh.length > 0)
          for (const p of await repo.postReservations(
            tx,
            tenantId,
            fresh,
            cost,
            hostedSpeech.length === 0 ? undefined : { perMinuteMinor: rate, hostedSpeech },
          ))
            answers.set(
              p.call_ref,
              p.outcome === "insufficient_funds"
                ? { ok: false, balance_minor: p.balance, required_minor: cost }
                : { ok: true, reserved_minor: cost },
            )
        return answers
      }),
    )
    yield* maybeAutocharge(tenantId)
    return callRefs.map(
      (ref): BatchReservation => byRef.get(ref) ?? { ok: false, balance_minor: 0, required_minor: cost },
    )
  })

/**
 * Settles a group of reserved calls at hangup (the calls that ended while the previous group was
 * being written): the connected seconds are charged (never more than was held; the runtime ends a
 * call when its reservation is used up) and the rest released, in one transaction for all of them,
 * each reservation settled exactly once, idempotently (a reservation already settled or released is
 * answered as it stands; a call ref twice in the group is settled once, with its first seconds).
 * The reservations are locked in call_ref order and the releases posted in workspace order, so two
 * groups never wait on each other in a cycle. Answers in the order of `items` (undefined: no reservation).
 */
export const settleCalls = (items: ReadonlyArray<{ readonly callRef: string; readonly connectedSeconds: number }>) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    if (items.length === 0) return [] as Array<Reservation | undefined>
    const secondsOf = new Map<string, number>()
    for (const i of items) if (!secondsOf.has(i.callRef)) secondsOf.set(i.callRef, i.connectedSeconds)
    const byRef = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        const answers = new Map<string, Reservation>()
        const locked = await repo.lockReservations(tx, [...secondsOf.keys()])
        const currencies = new Map<number, Awaited<ReturnType<typeof findTenantPlan>>["currency"]>()
        const releases: Array<{ tenantId: number; callRef: string; amountMinor: number }> = []
        const marks: Array<{ callRef: string; status: Reservation["status"]; settledMinor: number }> = []
        for (const r of locked) {
          if (r.status !== "reserved") {
            answers.set(r.call_ref, {
              call_ref: r.call_ref,
              reserved_minor: r.reserved_minor,
              status: r.status,
              settled_minor: r.settled_minor,
            })
            continue
          }
          let currency = currencies.get(r.tenant_id)
          if (currency === undefined) {
            currency = (await findTenantPlan(tx, r.tenant_id)).currency
            currencies.set(r.tenant_id, currency)
          }
          const seconds = secondsOf.get(r.call_ref) ?? 0
          const rate = r.rate_per_minute_minor === null ? undefined : Number(r.rate_per_minute_minor)
          const charged = Math.min(r.reserved_minor, callCostMinor(seconds, currency, rate))
          const unused = r.reserved_minor - charged
          if (unused > 0) releases.push({ tenantId: r.tenant_id, callRef: r.call_ref, amountMinor: unused })
          const status = seconds > 0 ? "settled" : "released"
          marks.push({ callRef: r.call_ref, status, settledMinor: charged })
          answers.set(r.call_ref, {
            call_ref: r.call_ref,
            reserved_minor: r.reserved_minor,
            status,
            settled_minor: charged,
          })
        }
        releases.sort((a, b) => a.tenantId - b.tenantId || (a.callRef < b.callRef ? -1 : 1))
        await repo.postReleases(tx, releases)
        await repo.markSettledMany(tx, marks)
        return answers
      }),
    )
    return items.map((i) => byRef.get(i.callRef))
  })

/** One call's hold: reserveCalls with one call ref; fails with InsufficientFunds when the wallet cannot pay it. */
export const reserveCall = (
  tenantId: number,
  callRef: string,
  expectedSeconds: number,
  opts: { onOwnAccounts: boolean } = { onOwnAccounts: false },
) =>
  Effect.flatMap(reserveCalls(tenantId, [callRef], expectedSeconds, opts), ([r]) =>
    r?.ok
      ? Effect.succeed({ call_ref: callRef, reserved_minor: r.reserved_minor })
      : Effect.fail(
          new InsufficientFunds({
            message: "the wallet cannot pay for this call",
            balanceMinor: r?.balance_minor ?? 0,
            requiredMinor: r?.required_minor ?? 0,
          }),
        ),
  )

/** One call's settlement: settleCalls with one call; undefined when it has no reservation. */
export const settleCall = (callRef: string, connectedSeconds: number) =>
  Effect.map(settleCalls([{ callRef, connectedSeconds }]), ([r]) => r)
