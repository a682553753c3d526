// The contact timeline (GET /api/timeline): everything the workspace did with one phone number or
// one of its users, newest first. Each source is read to the page size and merged here.
import { Effect } from "effect"
import { toE164 } from "../phones/phone.js"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { BadRequest, ValidationFailed } from "../platform/errors.js"
import { type Cursor, parseBefore } from "./timeline.cursor.js"
import * as ev from "./timeline.events.js"
import * as repo from "./timeline.repo.js"

export const TIMELINE_DEFAULT_N = 50
export const TIMELINE_MAX_N = 500

export type Subject = { readonly phone: string } | { readonly userId: number } | { readonly email: string }

export interface TimelineQuery {
  readonly phone?: string | undefined
  readonly user_id?: number | undefined
  readonly email?: string | undefined
}

/**
 * Exactly one identifier: none is 400 IDENTIFIER_REQUIRED (spec section 7); several is 400
 * TOO_MANY_IDENTIFIERS, since which one was meant cannot be guessed.
 */
export function subjectOf(q: TimelineQuery): Effect.Effect<Subject, BadRequest> {
  const given = (["phone", "user_id", "email"] as const).filter((k) => q[k] !== undefined)
  if (given.length === 0)
    return Effect.fail(new BadRequest({ message: "give one of phone, user_id or email", code: "IDENTIFIER_REQUIRED" }))
  if (given.length > 1)
    return Effect.fail(
      new BadRequest({
        message: `give only one of phone, user_id or email (got ${given.join(", ")})`,
        code: "TOO_MANY_IDENTIFIERS",
        field: given[1],
      }),
    )
  if (q.phone !== undefined) return Effect.succeed({ phone: q.phone })
  if (q.user_id !== undefined) return Effect.succeed({ userId: q.user_id })
  return Effect.succeed({ email: q.email! })
}

/** `before` as sent → a cursor, or 422 on `before`. */
export function cursorOf(before: string | undefined): Effect.Effect<Cursor | undefined, ValidationFailed> {
  if (before === undefined) return Effect.succeed(undefined)
  const cursor = parseBefore(before)
  if (cursor !== undefined) return Effect.succeed(cursor)
  return Effect.fail(
    new ValidationFailed({
      message: "before: must be an ISO 8601 timestamp with a zone, or a cursor from next_before",
      errors: [{ field: "before", message: "must be an ISO 8601 timestamp with a zone, or a cursor from next_before" }],
    }),
  )
}

export interface TimelinePage {
  readonly count: number
  readonly events: ReadonlyArray<ev.TimelineEvent>
  /** The last event's cursor when the page is full (there may be more); null at the end. */
  readonly next_before: string | null
}

const invalidPhone = (reason: string) =>
  new ValidationFailed({
    message: `phone: not a valid phone number (${reason})`,
    errors: [{ field: "phone", message: `must be a valid phone number (${reason})` }],
  })

export const getTimeline = (tenantId: number, subject: Subject, opts: { n: number; cursor: Cursor | undefined }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const now = (yield* Clock).now()
    const page: repo.Page = { n: opts.n, cursor: opts.cursor }

    let sources: Promise<ev.Sortable[]>[]
    if ("phone" in subject) {
      const tenant = yield* Effect.promise(() => repo.tenantCountry(sql, tenantId))
      if (tenant === undefined)
        return yield* Effect.dieMessage(`tenant ${tenantId} of an authenticated caller is missing`)
      const phone = toE164(subject.phone, tenant.country)
      if (!phone.ok) return yield* Effect.fail(invalidPhone(phone.reason))
      const p = phone.e164
      sources = [
        repo.callsByPhone(sql, tenantId, p, page).then((rows) => rows.map(ev.callEvent)),
        repo.turnSummariesByPhone(sql, tenantId, p, page).then((rows) => rows.map(ev.turnsEvent)),
        repo.approvalRequestsByPhone(sql, tenantId, p, now, page).then((rows) => rows.map(ev.approvalRequestedEvent)),
        repo.approvalResolutionsByPhone(sql, tenantId, p, now, page).then((rows) => rows.map(ev.approvalResolvedEvent)),
        repo.dncByPhone(sql, tenantId, p, page).then((rows) => rows.map(ev.dncEvent)),
        repo.dialerByPhone(sql, tenantId, p, page).then((rows) => rows.map(ev.dialerEvent)),
        repo.inboundCallsByPhone(sql, tenantId, p, page).then((rows) => rows.map(ev.inboundCallEvent)),
        repo.kbEventsByPhone(sql, tenantId, p, page).then((rows) => rows.map(ev.kbEvent)),
      ]
    } else {
      // Another workspace's user, or an address nobody here has: an empty timeline, not an error.
      const user = yield* Effect.promise(() => repo.findUser(sql, tenantId, subject))
      // An email address also has the outreach messages sent to it (message.* events).
      const messages =
        "email" in subject
          ? [
              repo
                .messageEventsByEmail(sql, tenantId, subject.email.trim().toLowerCase(), page)
                .then((rows) => rows.map(ev.messageEvent)),
            ]
          : []
      if (user === undefined && messages.length === 0)
        return { count: 0, events: [], next_before: null } satisfies TimelinePage
      sources = messages
      if (user !== undefined)
        sources.push(
          repo.decisionsByUser(sql, tenantId, user.id, now, page).then((rows) => rows.map(ev.approvalResolvedEvent)),
          repo.apiKeyEventsByUser(sql, tenantId, user.id, page).then((rows) => rows.map(ev.apiKeyEvent)),
          repo.workflowsCreatedBy(sql, tenantId, user.id, page).then((rows) => rows.map(ev.workflowEvent)),
          repo.consentAttestedBy(sql, tenantId, user.id, page).then((rows) => rows.map(ev.consentEvent)),
          repo.accountEvents(sql, user.id, page).then((rows) => rows.map((r) => ev.accountEvent(user, r))),
          repo.kbEventsByUser(sql, tenantId, user.id, page).then((rows) => rows.map(ev.kbEvent)),
        )
    }

    // Each source holds its own newest n; the newest n of their union are among them.
    const merged = (yield* Effect.promise(() => Promise.all(sources))).flat().sort(ev.newestFirst).slice(0, opts.n)
    const events = merged.map((m) => m.event)
    const last = events.at(-1)
    return {
      count: events.length,
      events,
      next_before: events.length === opts.n && last !== undefined ? last.cursor : null,
    } satisfies TimelinePage
  })
