// The monthly rental of rented numbers: a runtime process charges each number's next month once,
// retrying an hour later when the wallet cannot pay.
import { Effect } from "effect"
import { postEntry } from "../billing/ledger.repo.js"
import { addMonth } from "../billing/subscription.service.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { periodic } from "../platform/periodic.js"
import * as repo from "./numbers.repo.js"

const RENT_RETRY_MS = 3_600_000
const RENEWAL_BATCH = 100

/**
 * Charges the next month of every active rented number whose month has ended, once per month
 * (the ledger key names the number and the month). A wallet that cannot pay is tried again an
 * hour later; a released number is never charged again. Returns how many months were charged.
 */
export const renewDueNumbers = Effect.gen(function* () {
  const { sql } = yield* Db
  const clock = yield* Clock
  const now = clock.now()
  return yield* Effect.promise(
    () =>
      sql.begin(async (tx) => {
        const due = await repo.dueForRent(tx, now, RENEWAL_BATCH)
        let charged = 0
        for (const n of due) {
          const start = n.current_period_end ?? n.rent_due_at!
          const posted = await postEntry(tx, {
            tenantId: n.tenant_id,
            amountMinor: -n.monthly_cost_minor,
            kind: "number_rental",
            reference: `number:${n.id}`,
            idempotencyKey: `number:${n.id}:${start.toISOString()}`,
          })
          if (posted.ok) {
            await repo.advanceRent(tx, n.id, start, addMonth(start))
            charged++
          } else {
            await repo.postponeRent(tx, n.id, new Date(now.getTime() + RENT_RETRY_MS))
          }
        }
        return charged
      }) as Promise<number>,
  )
})

/** The rental loop a runtime process runs beside the subscription renewals. */
export const numberRentalLoop = periodic({
  what: "number rentals",
  every: "1 minute",
  tick: renewDueNumbers,
  report: (charged) => (charged > 0 ? { charged } : undefined),
  reported: "number rentals charged",
})
