// POST /dsr/erase: erases a data subject (phone or email) from the workspace in one transaction,
// keeps the audit rows with a keyed hash instead of the identifier, suppresses the hash for good
// and records the request (hash, actor, time). A live call with the contact is ended first: the
// runtime process that owns the call's run hears RT_RUN_CONTROL {command: "end_call", call_id} and
// hangs the leg up; the erase waits (briefly) for the call to be over so the runtime does not write
// the number back after the erase. The contact's pending approvals it cancels leave the supervisors'
// queues at once (approvals.<tenant>, announced after the commit).
import { Effect } from "effect"
import { announceApprovalChange } from "../approvals/approval-changes.js"
import { recordAudit } from "../audit/audit.repo.js"
import type { Principal } from "../auth/principal.js"
import { actorOf, auditActorOf } from "../auth/principal.js"
import { contactHash, dsrSecret, erasedMarker } from "../erasure/contact-hash.js"
import { markErased } from "../erasure/erased-contacts.repo.js"
import { Bus } from "../platform/Bus.js"
import { Db } from "../platform/Db.js"
import { ValidationFailed } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { RT_RUN_CONTROL, type RunControl } from "../platform/subjects.js"
import { Recordings } from "../recordings/recordings.service.js"
import { tenantCountry } from "../workspaces/workspaces.repo.js"
import * as dsr from "./dsr.repo.js"
import { eraseContact, liveCalls } from "./erase.repo.js"
import { parseIdentifier } from "./identifier.js"

/** How long an erase waits for a live call with the contact to end before going ahead. */
export const LIVE_CALL_WAIT_MS = 5000

export interface EraseResult {
  readonly erased: Record<string, number>
  readonly erased_at: string
  readonly receipt_id: string
}

export const eraseSubject = (principal: Principal, raw: string, ip: string | null = null) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const bus = yield* Bus
    const log = yield* Log
    const tenantId = principal.tenantId
    const country = yield* Effect.promise(() => tenantCountry(sql, tenantId))
    const id = parseIdentifier(raw, country)
    if (id instanceof ValidationFailed) return yield* Effect.fail(id)
    const secret = yield* Effect.promise(() => dsrSecret(sql))
    const hash = contactHash(secret, tenantId, id.value)
    const target = {
      tenantId,
      kind: id.kind,
      identifier: id.value,
      forms: id.kind === "phone" ? id.digitForms : [id.value],
      marker: erasedMarker(hash),
    }

    // End live calls with the contact, through the runtime process that holds each.
    const live = yield* Effect.promise(() => sql.begin((tx) => liveCalls(tx, target)))
    if (live.length > 0) {
      for (const c of live) {
        const msg: RunControl = { run_id: c.run_id, tenant_id: tenantId, command: "end_call", call_id: c.id }
        yield* Effect.try(() => bus.publish(RT_RUN_CONTROL, msg)).pipe(Effect.ignore)
      }
      const deadline = Date.now() + LIVE_CALL_WAIT_MS
      while (Date.now() < deadline) {
        const still = yield* Effect.promise(() => sql.begin((tx) => liveCalls(tx, target)))
        if (still.length === 0) break
        yield* Effect.sleep("100 millis")
      }
    }

    const { erased, erasedAt, receipt, cancelled } = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        const { counts: erased, cancelledApprovals: cancelled } = await eraseContact(tx, target)
        const erasedAt = await markErased(tx, tenantId, hash, id.kind)
        const receipt = await dsr.recordRequest(tx, {
          tenantId,
          action: "erase",
          hash,
          actor: actorOf(principal),
          detail: erased,
        })
        // The log names the erase by its marker, never the identifier it erased.
        await recordAudit(tx, auditActorOf(principal, ip), {
          action: "dsr.erased",
          target: target.marker,
          after: { kind: id.kind, receipt_id: receipt.receipt_id, erased },
        })
        return { erased, erasedAt, receipt, cancelled }
      }),
    )
    for (const a of cancelled)
      announceApprovalChange(bus, log, tenantId, { approvalId: a.id, status: "denied", at: a.decided_at })
    // The recordings' objects in an S3 store go now that their rows are gone (the sweep retries a failure).
    if ((erased["recordings"] ?? 0) > 0) {
      const recordings = yield* Recordings
      yield* Effect.promise(() =>
        recordings
          .purgeDeletedObjects()
          .catch((err: unknown) => log.warn({ err }, "recording objects left to the sweep")),
      )
    }
    return { erased, erased_at: erasedAt.toISOString(), receipt_id: receipt.receipt_id } satisfies EraseResult
  })
