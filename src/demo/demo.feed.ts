// GET /demo/feed: the one demo call a token was minted for, as numbered events (queued, ringing,
// answered, turn, ended) derived from its run's rows, transcript text masked. The token is the only
// credential; an unknown or expired one is NotFound. A demo is now or never: a call the dialer
// held for the calling window, or that no runtime took in time, is stopped here and ends.
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { skipTarget } from "../calls/calls.repo.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import { NotFound } from "../platform/errors.js"
import { maskContactDetails } from "./demo.mask.js"
import {
  callTurns,
  type DemoCallRow,
  type DemoProgress,
  type DemoTurn,
  demoProgress,
  findDemoCall,
  undialledDemoTargets,
} from "./demo.repo.js"

export const FEED_KINDS = ["queued", "ringing", "answered", "turn", "ended"] as const
export type FeedKind = (typeof FEED_KINDS)[number]

export interface FeedEvent {
  readonly seq: number
  /** ISO 8601. */
  readonly at: string
  readonly kind: FeedKind
  /** turn: what was said, phone numbers and emails masked; ended: how it ended, in words. */
  readonly text?: string
  /** turn: who said it. */
  readonly speaker?: "agent" | "callee" | "system"
  /** ended: the outcome as a token (no_answer, callee_hung_up, dnc_listed, …). */
  readonly outcome?: string
}

export interface Feed {
  readonly events: FeedEvent[]
  /** The call is over: no event will follow the last one. */
  readonly done: boolean
}

/*
 * Seqs are a function of the rows, so every read numbers an event the same way: the lifecycle
 * takes 1–3, a turn its run seq past those (a demo call is its run's only call), and the end one
 * past the run's last reserved turn seq, so it follows every turn the call can have.
 */
const SEQ_QUEUED = 1
const SEQ_RINGING = 2
const SEQ_ANSWERED = 3
const TURN_BASE = 3

/** Without the runtime's turn count, how long after the hang-up the last turns are waited for. */
export const TURNS_GRACE_MS = 5_000
/** A demo call no runtime process has dialled this long after it was asked for is not dialled. */
export const DEMO_QUEUE_TIMEOUT_MS = 5 * 60_000

const OUTCOME_TEXT: Readonly<Record<string, string>> = {
  agreed: "The call ended: you agreed.",
  declined: "The call ended: you declined.",
  no_decision: "The call ended.",
  callee_hung_up: "The call ended when you hung up.",
  max_duration: "The demo's time was up.",
  aborted: "The demo's time was up.",
  no_answer: "No answer.",
  busy: "The line was busy.",
  failed: "The call could not be connected.",
  voicemail: "A voicemail answered; the demo hung up.",
  voicemail_left: "A voicemail answered; the demo left its message.",
  do_not_call: "You asked not to be called again: this number gets no more demo calls.",
  interrupted: "The call was interrupted.",
  agent_error: "The call ended early: the agent ran into a problem.",
  dnc_listed: "Not called: the number is on the do-not-call list.",
  ncpr_registered: "Not called: the number is on the national do-not-call registry.",
  cooldown: "Not called: this number had a call in the last 7 days.",
  outside_calling_hours: "Not called: it is outside calling hours (09:00–21:00) where the number is.",
  not_a_calling_day: "Not called: today is not a calling day where the number is.",
  window_never_open: "Not called: there are no calling hours where the number is.",
  demo_queue_timeout: "Not called: the demo could not place the call in time; please try again later.",
  not_placed: "Not called.",
}

export const outcomeText = (outcome: string): string =>
  OUTCOME_TEXT[outcome] ?? `The call ended (${outcome.replace(/_/g, " ")}).`

const iso = (d: Date): string => d.toISOString()

/** When and how the call ended, once it has and its transcript is all stored. */
function endOf(p: DemoProgress, turns: readonly DemoTurn[], nowMs: number): { at: Date; outcome: string } | undefined {
  if (p.call_id !== null) {
    if (p.call_status !== "ended" || p.ended_at === null) return undefined
    const graceOver = nowMs - p.ended_at.getTime() >= TURNS_GRACE_MS
    const allStored = p.turns_logged !== null && turns.length >= p.turns_logged
    return allStored || graceOver ? { at: p.ended_at, outcome: p.call_outcome ?? "failed" } : undefined
  }
  if (p.target_status === "skipped" || p.target_status === "done")
    return { at: p.target_updated_at, outcome: p.target_outcome ?? "not_placed" }
  if (p.run_status === "completed" || p.run_status === "cancelled" || p.run_status === "failed")
    return { at: p.target_updated_at, outcome: "not_placed" }
  return undefined
}

/** The call's events as of now (pure): everything that has happened, in seq order. */
export function feedEvents(
  call: Pick<DemoCallRow, "created_at">,
  p: DemoProgress | undefined,
  turns: readonly DemoTurn[],
  nowMs: number,
): Feed {
  const events: FeedEvent[] = [{ seq: SEQ_QUEUED, at: iso(call.created_at), kind: "queued" }]
  if (p === undefined) return { events, done: false }
  if (p.call_id !== null && p.started_at !== null)
    events.push({ seq: SEQ_RINGING, at: iso(p.started_at), kind: "ringing" })
  const end = endOf(p, turns, nowMs)
  // The answer is written in a group just after it happens, so the first turn can be stored before it:
  // the turns wait for the recorded answer (or, if it never was, for the end, then the first turn's time
  // stands for it), so nothing once shown changes.
  const answeredAt = p.answered_at ?? (end !== undefined ? turns[0]?.at : undefined)
  if (p.call_id !== null && answeredAt !== undefined) {
    events.push({ seq: SEQ_ANSWERED, at: iso(answeredAt), kind: "answered" })
    for (const t of turns)
      events.push({
        seq: TURN_BASE + t.seq,
        at: iso(t.at),
        kind: "turn",
        speaker: t.speaker,
        text: maskContactDetails(t.text),
      })
  }
  if (end !== undefined) {
    const lastTurn = Math.max(p.turn_seq, ...turns.map((t) => t.seq))
    events.push({
      seq: TURN_BASE + lastTurn + 1,
      at: iso(end.at),
      kind: "ended",
      text: outcomeText(end.outcome),
      outcome: end.outcome,
    })
  }
  return { events, done: end !== undefined }
}

/** Why a never-dialled demo target is given up now (held for the calling window, or queued too long), if it is. */
export function givenUpReason(
  t: { target_status: string; attempts: number; hold_reason: string | null },
  createdAt: Date,
  nowMs: number,
): string | undefined {
  if (t.attempts !== 0) return undefined
  if (t.target_status === "waiting") return t.hold_reason ?? "outside_calling_hours"
  if (t.target_status === "queued" && nowMs - createdAt.getTime() >= DEMO_QUEUE_TIMEOUT_MS) return "demo_queue_timeout"
  return undefined
}

/** Skips a never-dialled demo target with `reason` (a no-op if the dialer took it meanwhile); its run then ends. */
export const giveUp = (
  sql: Sql,
  t: { tenant_id: number; run_id: number; run_target_id: number; target_id: number },
  reason: string,
  nowMs: number,
): Promise<void> =>
  skipTarget(sql, t.tenant_id, t.run_id, t.run_target_id, {
    targetId: t.target_id,
    at: nowMs,
    decision: "skip",
    reason,
    detail: { demo: true },
    costMinor: null,
  })

/** Gives up the demo calls the dialer should no longer dial (the sweeper's part); returns how many. */
export const giveUpUndialled = (nowMs: number, limit = 500): Effect.Effect<number, never, Db> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const rows = yield* Effect.promise(() => undialledDemoTargets(sql, new Date(nowMs - DEMO_QUEUE_TIMEOUT_MS), limit))
    for (const r of rows) {
      const reason = r.hold_reason ?? "demo_queue_timeout"
      yield* Effect.promise(() => giveUp(sql, r, reason, nowMs))
    }
    return rows.length
  })

const feedNotFound = () => new NotFound({ message: "no demo call for this token (unknown or expired)" })

export const tokenHash = (token: string): Buffer => createHash("sha256").update(token, "utf8").digest()

/** The feed of the demo call `token` was minted for, events with seq above `after`. */
export const demoFeed = (token: string, after: number): Effect.Effect<Feed, NotFound, Db | Clock> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const call = yield* Effect.promise(() => findDemoCall(sql, tokenHash(token)))
    if (call === undefined || call.expires_at.getTime() <= clock.nowMs()) return yield* Effect.fail(feedNotFound())
    let p = yield* Effect.promise(() => demoProgress(sql, call.run_id))
    const reason = p === undefined ? undefined : givenUpReason(p, call.created_at, clock.nowMs())
    if (p !== undefined && reason !== undefined) {
      const target = { ...p, run_id: call.run_id }
      yield* Effect.promise(() => giveUp(sql, target, reason, clock.nowMs()))
      p = yield* Effect.promise(() => demoProgress(sql, call.run_id))
    }
    const callId = p?.call_id ?? null
    const turns = callId === null ? [] : yield* Effect.promise(() => callTurns(sql, call.run_id, callId))
    const feed = feedEvents(call, p, turns, clock.nowMs())
    return { events: feed.events.filter((e) => e.seq > after), done: feed.done }
  })
