// POST /dsr/export: everything the workspace holds about one contact (a callee, by phone or email),
// gathered through the registry of contact-bearing tables (contact-tables.ts), and recorded in the
// DSR audit log by its keyed hash. An unknown contact gets the same shape with empty sections.
//
// The contact's calls' recordings are not in the bundle: `recordings_zip_url` is a signed link, an hour
// long, to a zip of them streamed as it is downloaded (recordings-link.ts, GET /dsr/recordings/{token});
// absent when the contact has none.
import { Effect } from "effect"
import { actorOf, type Principal } from "../auth/principal.js"
import { contactHashFor } from "../erasure/contact-hash.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { ValidationFailed } from "../platform/errors.js"
import { Recordings } from "../recordings/recordings.service.js"
import type { TimelineEvent } from "../timeline/timeline.events.js"
import { cursorOf, getTimeline, TIMELINE_MAX_N } from "../timeline/timeline.service.js"
import { recordRequest } from "./dsr.repo.js"
import * as repo from "./export.repo.js"
import { parseIdentifier } from "./identifier.js"
import { RECORDINGS_LINK_MAX_CALLS, signRecordingsLink } from "./recordings-link.js"

/** At most this many timeline events (the timeline summarises; the other sections hold every row). */
export const EXPORT_TIMELINE_MAX = 5_000

export interface ContactExport {
  readonly contact: { readonly kind: "phone" | "email"; readonly identifier: string }
  readonly generated_at: string
  readonly receipt_id: string
  readonly bundle: repo.ContactRows & { readonly timeline: TimelineEvent[] }
  /** The token of the recordings' link (the route makes it a URL), when there are recordings. */
  readonly recordingsToken?: string
}

const isMessageEvent = (e: TimelineEvent) =>
  e.kind === "email" && typeof e.payload["event"] === "string" && e.payload["event"].startsWith("message.")

/** The contact's timeline, newest first, every page up to EXPORT_TIMELINE_MAX events. */
const timelineOf = (tenantId: number, subject: { phone: string } | { email: string }) =>
  Effect.gen(function* () {
    const out: TimelineEvent[] = []
    let cursor: Parameters<typeof getTimeline>[2]["cursor"]
    for (;;) {
      const page = yield* getTimeline(tenantId, subject, { n: TIMELINE_MAX_N, cursor })
      // An email can also be a member's: keep only what happened to it as a contact (messages).
      out.push(...("email" in subject ? page.events.filter(isMessageEvent) : page.events))
      if (page.next_before === null || out.length >= EXPORT_TIMELINE_MAX) break
      cursor = yield* cursorOf(page.next_before).pipe(Effect.orDie)
    }
    return out.slice(0, EXPORT_TIMELINE_MAX)
  })

export const exportContact = (principal: Principal, rawIdentifier: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const now = (yield* Clock).now()
    const tenantId = principal.tenantId
    const country = yield* Effect.promise(() => repo.tenantCountry(sql, tenantId))
    if (country === undefined)
      return yield* Effect.dieMessage(`tenant ${tenantId} of an authenticated caller is missing`)
    const id = parseIdentifier(rawIdentifier, country)
    if (id instanceof ValidationFailed) return yield* Effect.fail(id)

    const rows = yield* Effect.promise(() => repo.contactRows(sql, tenantId, id))
    const timeline = yield* timelineOf(tenantId, id.kind === "phone" ? { phone: id.value } : { email: id.value }).pipe(
      Effect.catchTag("ValidationFailed", () => Effect.succeed([] as TimelineEvent[])),
    )
    const hash = yield* Effect.promise(() => contactHashFor(sql, tenantId, id.value))
    const recordings = yield* Recordings
    const callIds = rows.calls.map((c) => Number(c["id"]))
    // The newest calls first, when a contact has more recorded calls than a link names.
    const recorded = [
      ...new Set((yield* Effect.promise(() => recordings.recordingsOf(tenantId, callIds))).map((r) => r.call_id)),
    ]
      .map(Number)
      .sort((a, b) => b - a)
    const counts = {
      ...Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, (v as unknown[]).length])),
      recorded_calls: recorded.length,
    }
    const receipt = yield* Effect.promise(() =>
      recordRequest(sql, { tenantId, action: "export", hash, actor: actorOf(principal), detail: counts }),
    )
    const recordingsToken =
      recorded.length === 0
        ? undefined
        : yield* Effect.promise(() =>
            signRecordingsLink(
              sql,
              { tenantId, callIds: recorded.slice(0, RECORDINGS_LINK_MAX_CALLS), receiptId: receipt.receipt_id },
              Math.floor(now.getTime() / 1000),
            ),
          )
    return {
      contact: { kind: id.kind, identifier: id.value },
      generated_at: now.toISOString(),
      receipt_id: receipt.receipt_id,
      bundle: { ...rows, timeline },
      ...(recordingsToken !== undefined && { recordingsToken }),
    } satisfies ContactExport
  })
