// Where a signup came from, recorded in its transaction, and the signups-by-channel report
// (GET /api/internal/attribution/signups) over a window ending now.
import { Effect } from "effect"
import { Clock } from "../platform/Clock.js"
import { Db, type Tx } from "../platform/Db.js"
import { channelOf, type SignupAttribution } from "./attribution.js"
import { insertSignupAttribution, signupsByChannel } from "./attribution.repo.js"

export const DEFAULT_WINDOW_DAYS = 90

/** Records the signup's source (none given: no fields, no first touch) with the channel it counts under. */
export const recordSignupSource = (
  tx: Tx,
  s: { tenantId: number; userId: number; attribution: SignupAttribution | undefined; at: Date },
): Promise<void> => {
  const attribution = s.attribution ?? { body: {}, firstTouch: undefined }
  return insertSignupAttribution(tx, {
    tenantId: s.tenantId,
    userId: s.userId,
    attribution,
    channel: channelOf(attribution),
    at: s.at,
  })
}

export const signupReport = (days: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const rows = yield* Effect.promise(() => signupsByChannel(sql, new Date(now.getTime() - days * 86_400_000), now))
    return {
      window_days: days,
      total: rows.reduce((n, r) => n + r.signups, 0),
      by_source: rows.map((r) => ({
        source: r.source,
        medium: r.medium,
        campaign: r.campaign,
        signups: r.signups,
        verified: r.verified,
        paying: r.paying,
      })),
    }
  })
