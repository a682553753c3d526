// SQL of a workflow's campaign analytics: the funnel, outcomes per UTC day, dials and connects per 15-minute
// slot and number prefix, reply latency percentiles and spend, read from the rollups of migration 0057.

import type { Sql } from "../platform/Db.js"
import type { Currency } from "../platform/money.js"

export interface Range {
  readonly from: Date
  readonly to: Date
}

/** Outcomes that count as an agreement (as the rehearsal readout buckets them), besides goal_met. */
export const AGREED_OUTCOMES = ["agreed", "agreed_with_concession", "agreed_after_call"] as const
/** Outcomes of an answered call that reached a voicemail, not a person. */
export const VOICEMAIL_OUTCOMES = ["voicemail", "voicemail_left"] as const
/** Talk time from which a conversation counts as one. */
export const TALKED_SECONDS = 30
/**
 * How many leading characters of a number fix its callee's zone: "+", the country code and, for
 * NANP numbers, the area code ("+1202"); Australian prefixes ("+612") fit as well.
 */
export const ZONE_PREFIX_CHARS = 5

export const workflowOfTenant = async (sql: Sql, tenantId: number, workflowId: number) => {
  const [row] = await sql<[{ id: number; currency: Currency }?]>`
    select w.id, t.currency from workflows w join tenants t on t.id = w.tenant_id
    where w.id = ${workflowId} and w.tenant_id = ${tenantId}`
  return row
}

export interface FunnelRow {
  readonly targets: number
  readonly dialed: number
  readonly call_cost_minor: string
}

/** The audience, the targets dialed in range and what their calls cost (settled at hangup). */
const dialed = async (sql: Sql, workflowId: number, r: Range): Promise<FunnelRow> => {
  const [row] = await sql<[FunnelRow]>`
    select (select count(*)::int from audience_targets where workflow_id = ${workflowId}) as targets,
      count(distinct target_id)::int as dialed, coalesce(sum(cost_minor), 0)::bigint as call_cost_minor
    from calls
    where workflow_id = ${workflowId} and started_at >= ${r.from} and started_at < ${r.to}`
  return row
}

export interface AnsweredRow {
  readonly answered: number
  readonly human: number
  readonly talked: number
  readonly agreed: number
  readonly analysis_cost_minor: string
}

/**
 * Distinct targets at each answered step: a target is human when one of its answered calls was not
 * a voicemail, talked when such a call lasted TALKED_SECONDS, agreed when a call's outcome or its
 * analysis (goal_met) says so; and what the answered calls' analyses were charged.
 */
const answered = async (sql: Sql, workflowId: number, r: Range): Promise<AnsweredRow> => {
  const [row] = await sql<[AnsweredRow]>`
    select count(distinct target_id)::int as answered,
      count(distinct target_id) filter (where not voicemail)::int as human,
      count(distinct target_id) filter (where not voicemail and connected_seconds >= ${TALKED_SECONDS})::int
        as talked,
      count(distinct target_id) filter (where agreed)::int as agreed,
      coalesce(sum(charged_minor), 0)::bigint as analysis_cost_minor
    from (
      select c.target_id, c.connected_seconds, ca.charged_minor,
        coalesce(c.outcome in ${sql(VOICEMAIL_OUTCOMES)}, false) as voicemail,
        coalesce(c.outcome in ${sql(AGREED_OUTCOMES)}, false) or coalesce(ca.goal_met, false) as agreed
      from calls c left join call_analyses ca on ca.call_id = c.id
      where c.workflow_id = ${workflowId} and c.started_at >= ${r.from} and c.started_at < ${r.to}
        and c.answered_at is not null
    ) x`
  return row
}

export interface DayOutcomeRow {
  readonly day: string
  readonly outcome: string | null
  readonly calls: number
}

/** Calls per UTC day and outcome (null: not ended yet). */
const outcomesPerDay = (sql: Sql, workflowId: number, r: Range) =>
  sql<DayOutcomeRow[]>`
    select to_char(started_at at time zone 'UTC', 'YYYY-MM-DD') as day, outcome, count(*)::int as calls
    from calls
    where workflow_id = ${workflowId} and started_at >= ${r.from} and started_at < ${r.to}
    group by 1, 2`

/** Buckets of 15 minutes: every zone's offset is a whole number of them (+05:30, +05:45, +12:45). */
export const SLOT_SECONDS = 900
/** turn_latency_rollups counts a UTC day's turns per value (migration 0058). */
export const LATENCY_DAY_SECONDS = 86_400

export interface HourPrefixRow {
  /** The 15-minute slot's start, as epoch seconds. */
  readonly slot: number
  /** A number of the prefix, to find its zone by. */
  readonly phone: string
  readonly dials: number
  readonly connects: number
}

/**
 * Dials and connects per 15-minute slot and zone prefix of the number: a few thousand rows at most
 * a month, shifted to the callee's local time by the caller (zones come from libphonenumber).
 */
const dialsPerSlotAndPrefix = (sql: Sql, workflowId: number, r: Range) =>
  sql<HourPrefixRow[]>`
    select (floor(extract(epoch from started_at) / ${SLOT_SECONDS}) * ${SLOT_SECONDS})::float8 as slot,
      min(phone_e164) as phone, count(*)::int as dials, count(answered_at)::int as connects
    from calls
    where workflow_id = ${workflowId} and started_at >= ${r.from} and started_at < ${r.to}
    group by 1, left(phone_e164, ${ZONE_PREFIX_CHARS})`

export interface LatencyRow {
  readonly n: number
  readonly p50: number | null
  readonly p90: number | null
  readonly p99: number | null
}

/** A turn's latency in ms to three significant figures, as turn_latency_rollups counts it (migration 0058). */
const latencyBucket = (sql: Sql) => sql`analytics_latency_bucket(t.latency_ms)`

/** Agent turns with a latency spoken in [from, to) in the workflow's runs (turns_latency_idx). */
const latencyTurns = (sql: Sql, workflowId: number, from: Date, to: Date) => sql`
  select ${latencyBucket(sql)} as latency, 1 as turns
  from runs ru join turns t on t.run_id = ru.id
  where ru.workflow_id = ${workflowId} and t.at >= ${from} and t.at < ${to}
    and t.latency_ms is not null and t.speaker = 'agent'`

/**
 * Percentiles of the agent's reply latency, end of the callee's speech to the first audio (`latency_ms.total`,
 * migration 0048), over agent turns spoken in range in the workflow's runs: each turn's value to three
 * significant figures, and the percentile the first such value whose cumulative share reaches it (as
 * percentile_disc). The whole UTC days from turn_latency_rollups, the partial days at the ends from turns.
 */
export const replyLatency = async (sql: Sql, workflowId: number, r: Range): Promise<LatencyRow> => {
  const p = slotPlan(r, LATENCY_DAY_SECONDS)
  const [row] = await sql<[LatencyRow]>`
    select coalesce(max(total), 0)::int as n,
      min(latency) filter (where cum >= 0.5 * total) as p50,
      min(latency) filter (where cum >= 0.9 * total) as p90,
      min(latency) filter (where cum >= 0.99 * total) as p99
    from (
      -- a turn whose total is not a number (none of ours) groups under null, counted in neither
      select latency, sum(turns) over (order by latency nulls last) as cum,
        sum(turns) filter (where latency is not null) over () as total
      from (
        select latency, sum(turns) as turns
        from (
          select latency, turns from turn_latency_rollups
          where workflow_id = ${workflowId} and day >= ${p.fromSlot} and day < ${p.toSlot}
          union all ${latencyTurns(sql, workflowId, p.from, p.head)}
          union all ${latencyTurns(sql, workflowId, p.tail, p.to)}
        ) x
        group by 1
        having sum(turns) > 0
      ) h
    ) c`
  return row
}

/** The same percentiles sorted from every turn in range (percentile_disc): the reference of tests and bench. */
const latencySorted = async (sql: Sql, workflowId: number, r: Range): Promise<LatencyRow> => {
  const [row] = await sql<[LatencyRow]>`
    select count(*)::int as n,
      percentile_disc(0.5) within group (order by latency) as p50,
      percentile_disc(0.9) within group (order by latency) as p90,
      percentile_disc(0.99) within group (order by latency) as p99
    from (${latencyTurns(sql, workflowId, r.from, r.to)}) x
    where latency is not null`
  return row
}

/**
 * The same figures computed from the calls themselves, as before the rollups (funnel: distinct targets with
 * a call placed in range): the reference the tests and bench/analytics.ts compare the rollups with.
 */
export const direct = { dialed, answered, outcomesPerDay, dialsPerSlotAndPrefix, latencySorted }

/**
 * Where a range meets the rollups: whole slots [fromSlot, toSlot) from the rollups, the partial slots at
 * its ends ([from, head), [tail, to)) from calls; a range inside one slot is all head.
 */
export interface SlotPlan extends Range {
  readonly fromSlot: number
  readonly toSlot: number
  readonly head: Date
  readonly tail: Date
}

export const slotPlan = (r: Range, seconds = SLOT_SECONDS): SlotPlan => {
  const fromSlot = Math.ceil(r.from.getTime() / 1000 / seconds)
  const toSlot = Math.floor(r.to.getTime() / 1000 / seconds)
  if (toSlot <= fromSlot) return { ...r, fromSlot, toSlot: fromSlot, head: r.to, tail: r.to }
  const at = (slot: number) => new Date(slot * seconds * 1000)
  return { ...r, fromSlot, toSlot, head: at(fromSlot), tail: at(toSlot) }
}

/**
 * A workflow's calls placed in range, one row each, for the partial slots at the range's ends (ended calls:
 * calls_workflow_started_idx) and for the calls still in progress (outcome null, never rolled up:
 * calls_in_progress_idx), beside the whole slots' rollups.
 */
const callRows = (sql: Sql, workflowId: number, p: SlotPlan) => {
  const rows = (where: ReturnType<Sql>) => sql`
    select floor(extract(epoch from c.started_at) / ${SLOT_SECONDS})::int as slot,
      left(c.phone_e164, ${ZONE_PREFIX_CHARS}) as prefix, c.outcome, analytics_sample(c.phone_e164) as sample,
      1 as calls, (c.answered_at is not null)::int as connects, coalesce(c.cost_minor, 0) as cost_minor,
      case when c.answered_at is not null then coalesce(ca.charged_minor, 0) else 0 end as analysis_minor
    from calls c left join call_analyses ca on ca.call_id = c.id
    where c.workflow_id = ${workflowId} and ${where}`
  return sql`
    ${rows(sql`c.outcome is not null and c.started_at >= ${p.from} and c.started_at < ${p.head}`)}
    union all ${rows(sql`c.outcome is not null and c.started_at >= ${p.tail} and c.started_at < ${p.to}`)}
    union all ${rows(sql`c.outcome is null and c.started_at >= ${p.from} and c.started_at < ${p.to}`)}`
}

type FunnelCounts = { targets: number; dialed: number; answered: number; human: number; talked: number; agreed: number }

/**
 * The audience, and the targets with a call placed in range at each step, as far as their first and last
 * such calls tell (analytics_targets): one of them in range is a call in range; a target whose calls at a
 * step all lie before the range or after it has none. A target with such calls before and after the range
 * (and none of the two in it) is not counted: exact for any range that ends after the workflow's latest
 * call (the default, up to now) or starts before its first.
 *
 * A range holding every target's first and last calls counts every target at every step it reached: the
 * workflow's totals (analytics_funnel_totals, migration 0058), after two index probes; another range reads the
 * target rows whose last call is not before it.
 */
export const funnel = async (sql: Sql, workflowId: number, r: Range): Promise<FunnelCounts> => {
  const [whole] = await sql<[FunnelCounts & { within: boolean }]>`
    select coalesce((select targets from audience_counts where workflow_id = ${workflowId}), 0)::int as targets,
      coalesce(f.dialed, 0)::int as dialed, coalesce(f.answered, 0)::int as answered,
      coalesce(f.human, 0)::int as human, coalesce(f.talked, 0)::int as talked, coalesce(f.agreed, 0)::int as agreed,
      coalesce((select first_dialed_at from analytics_targets where workflow_id = ${workflowId}
          order by first_dialed_at limit 1) >= ${r.from}, true)
        and coalesce((select last_dialed_at from analytics_targets where workflow_id = ${workflowId}
          order by last_dialed_at desc limit 1) < ${r.to}, true) as within
    from (select 1) one left join analytics_funnel_totals f on f.workflow_id = ${workflowId}`
  if (whole!.within) {
    const { within: _, ...counts } = whole!
    return counts
  }
  const inRange = (step: string) => {
    const first = sql(`first_${step}_at`)
    const last = sql(`last_${step}_at`)
    return sql`(${first} >= ${r.from} and ${first} < ${r.to} or ${last} >= ${r.from} and ${last} < ${r.to})`
  }
  const [row] = await sql<[Omit<FunnelCounts, "targets">]>`
    select count(*)::int as dialed, count(*) filter (where ${inRange("answered")})::int as answered,
      count(*) filter (where ${inRange("human")})::int as human,
      count(*) filter (where ${inRange("talked")})::int as talked,
      count(*) filter (where ${inRange("agreed")})::int as agreed
    from analytics_targets
    where workflow_id = ${workflowId} and last_dialed_at >= ${r.from} and first_dialed_at < ${r.to}
      and ${inRange("dialed")}`
  return { targets: whole!.targets, ...row! }
}

const DAY_SLOTS = 86_400 / SLOT_SECONDS

export interface DayRow extends DayOutcomeRow {
  readonly cost_minor: string
  readonly analysis_minor: string
}

/**
 * Calls per UTC day and outcome (null: not ended yet), with their settled cost and analyses' charges: the whole
 * slots from call_rollups_outcomes (slot × outcome), the rest from calls.
 */
export const daysOfSlots = (sql: Sql, workflowId: number, p: SlotPlan) =>
  sql<DayRow[]>`
    select to_char(to_timestamp(d::float8 * 86400) at time zone 'UTC', 'YYYY-MM-DD') as day, outcome, calls,
      cost_minor, analysis_minor
    from (
      select slot / ${DAY_SLOTS} as d, outcome, sum(calls)::int as calls, sum(cost_minor)::bigint as cost_minor,
        sum(analysis_minor)::bigint as analysis_minor
      from (
        select slot, outcome, calls, cost_minor, analysis_minor from call_rollups_outcomes
        where workflow_id = ${workflowId} and slot >= ${p.fromSlot} and slot < ${p.toSlot}
        union all select slot, outcome, calls, cost_minor, analysis_minor from (${callRows(sql, workflowId, p)}) c
      ) x
      group by 1, 2
      -- a rollup row whose calls all left (deleted, or moved to another outcome) stays, at zero
      having sum(calls) <> 0 or sum(cost_minor) <> 0 or sum(analysis_minor) <> 0
    ) y`

/**
 * Dials and connects per 15-minute slot and masked number (its prefix and length: a prefix may come in two
 * lengths, each a row of its own), to find the zone by: the whole slots from call_rollups_grid (slot × prefix),
 * the rest from calls.
 */
export const prefixesOfSlots = (sql: Sql, workflowId: number, p: SlotPlan) =>
  sql<HourPrefixRow[]>`
    select (slot::float8 * ${SLOT_SECONDS}) as slot, sample as phone, sum(calls)::int as dials,
      sum(connects)::int as connects
    from (
      select slot, sample, dials as calls, connects from call_rollups_grid
      where workflow_id = ${workflowId} and slot >= ${p.fromSlot} and slot < ${p.toSlot}
      union all select slot, sample, calls, connects from (${callRows(sql, workflowId, p)}) c
    ) x
    group by x.slot, sample`
