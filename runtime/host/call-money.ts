// The money of the calls driven in this process (src/billing): a call's cost reserved before it is
// dialed and settled at its end, each grouped with the others of the same moment (one transaction
// and one wallet lock per group: a dial batch starts many calls in one loop turn); and the public
// demo's calls, which hold and charge nothing, to anyone.
import type { Effect, Either } from "effect"
import type { Logger } from "pino"
import type { HostedSpeechPart } from "../../src/billing/pricing.js"
import { reserveCalls, settleCalls } from "../../src/billing/usage.service.js"
import type { AppConfig } from "../../src/platform/AppConfig.js"
import type { Bus } from "../../src/platform/Bus.js"
import { BatchWriter } from "../../src/platform/batch-writer.js"
import type { Clock } from "../../src/platform/Clock.js"
import { type Db, retryOnDisconnect } from "../../src/platform/Db.js"
import type { Log } from "../../src/platform/Log.js"
import type { DriverDeps } from "../actors/run-driver.js"

/** Runs a billing effect in the host's services. */
export type RunEffect = <A, E>(
  eff: Effect.Effect<A, E, Db | Clock | Log | Bus | AppConfig>,
) => Promise<Either.Either<A, E>>

export type RunMoney = DriverDeps["money"]

export interface CallMoney {
  /** Calls on the platform's accounts: held and charged at the per-minute rate. */
  readonly platform: RunMoney
  /** Calls on the workspace's own accounts: free of the per-minute rate. */
  readonly own: RunMoney
  /** The public demo's calls: the platform's own, nothing held or charged. */
  readonly free: RunMoney
}

interface Reservation {
  readonly tenantId: number
  readonly callRef: string
  readonly seconds: number
  readonly hostedSpeech: readonly HostedSpeechPart[]
}
type Reserved = { ok: true; reservedMinor: number } | { ok: false }
type Charged = { chargedMinor: number }

/** `callEnded`: a call that was connected ended (post-call analysis has work). */
export const callMoney = (d: { log: Logger; runEffect: RunEffect; callEnded: () => void }): CallMoney => {
  const { log, runEffect } = d
  // The settlements of calls ending together go in one transaction per group (runtime/actors/settlements.ts).
  const settlements = new BatchWriter<"settle", { callRef: string; seconds: number }, Charged | undefined>(
    async (_, items) => {
      const group = items.map((i) => ({ callRef: i.callRef, connectedSeconds: i.seconds }))
      const r = await retryOnDisconnect(() => runEffect(settleCalls(group)))
      if (r._tag === "Left") return items.map(() => undefined)
      return r.right.map((x) => (x === undefined ? undefined : { chargedMinor: x.settled_minor ?? 0 }))
    },
    { maxBatch: 1_000, splitRefused: true },
  )
  /** A run's money: its calls are free of the per-minute rate only if they go out on the workspace's own accounts. */
  const moneyFor = (onOwnAccounts: boolean): RunMoney => {
    // The reservations of calls of one workspace (and terms) starting together go in one transaction
    // and one wallet lock: a dial batch starts many calls in one loop turn.
    const reservations = new BatchWriter<string, Reservation, Reserved>(
      async (_, items) => {
        const { tenantId, seconds, hostedSpeech } = items[0]!
        const callRefs = items.map((i) => i.callRef)
        // Postgres out of reach is waited out (idempotent by call ref), not taken for a lack of funds.
        const r = await retryOnDisconnect(() =>
          runEffect(reserveCalls(tenantId, callRefs, seconds, { onOwnAccounts, hostedSpeech })),
        )
        if (r._tag === "Left") {
          log.info({ tenant_id: tenantId, reason: r.left.message }, "calls not funded")
          return callRefs.map(() => ({ ok: false as const }))
        }
        return r.right.map((x, i) => {
          if (x.ok) return { ok: true as const, reservedMinor: x.reserved_minor }
          log.info({ call_ref: callRefs[i], reason: "insufficient_funds" }, "call not funded")
          return { ok: false as const }
        })
      },
      { maxBatch: 500 },
    )
    return {
      // The platform's hosted speech is paid for by calls on its accounts; a workspace on its own
      // accounts is never given it (hosted-speech.ts), so it has nothing to pay for.
      paysHostedSpeech: !onOwnAccounts,
      reserve: (tenantId: number, callRef: string, seconds: number, hostedSpeech: readonly HostedSpeechPart[] = []) =>
        reservations.submit(`${tenantId}:${seconds}:${hostedSpeech.join(",")}`, {
          tenantId,
          callRef,
          seconds,
          hostedSpeech,
        }),
      settle: (callRef: string, seconds: number) => {
        if (seconds > 0) d.callEnded()
        return settlements.submit("settle", { callRef, seconds })
      },
    }
  }
  return {
    platform: moneyFor(false),
    own: moneyFor(true),
    free: {
      paysHostedSpeech: false,
      reserve: async () => ({ ok: true as const, reservedMinor: 0 }),
      settle: async (_callRef: string, seconds: number) => {
        if (seconds > 0) d.callEnded()
        return { chargedMinor: 0 }
      },
    },
  }
}
