// The signups-by-channel report (GET /api/internal/attribution/signups) over a window ending now.
import { Effect } from "effect"
import { Clock } from "../platform/Clock.js"
import { Db } from "../platform/Db.js"
import { signupsByChannel } from "./attribution.repo.js"

export const DEFAULT_WINDOW_DAYS = 90

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
