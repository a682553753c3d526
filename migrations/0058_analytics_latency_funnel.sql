-- The two analytics reads that still grew with the range (bench/RESULTS.md, "bench/analytics"): the reply
-- latency percentiles sorted every agent turn in range, and the funnel read every target row of the workflow.
--
-- Latency: agent turns' latency_ms.total counted per workflow, UTC day and value to three significant figures
-- (turn_latency_rollups), kept by triggers on turns; the percentiles are read from the whole days' counts and the
-- partial days' turns (turns_latency_idx), each turn's value rounded the same way, so they are exact to that
-- rounding (at most 0.5%). The constant mirrors src/analytics/analytics.repo.ts: LATENCY_DAY_SECONDS 86400.
--
-- Funnel: each workflow's targets counted at each step over its whole history (analytics_funnel_totals), kept by
-- a trigger on analytics_targets (0057); a range holding every target's first and last calls (the usual one: the
-- last 30 days of a campaign younger than that, or everything) reads that row; another range reads the target
-- rows whose last call is not before it (analytics_targets_last_idx).

-- A turn's latency_ms.total in ms to three significant figures (null when it has none, or not a number).
-- Each one expression (no FROM), so the planner inlines them into the queries and triggers that call them per
-- turn; float8 for the rounding (numeric's log is ~30 µs a call), numeric only to clamp what jsonb may hold.
create function analytics_round3(v float8) returns integer language sql immutable parallel safe as $$
  select case when v < 999.5 then round(v)::integer
    else (round(v / 10 ^ (floor(log(v)) - 2)) * 10 ^ (floor(log(v)) - 2))::integer end $$;
create function analytics_latency_bucket(latency jsonb) returns integer language sql immutable parallel safe as $$
  select case
    when jsonb_typeof(latency -> 'total') is distinct from 'number' then null
    else analytics_round3(least(greatest((latency -> 'total')::numeric, 0), 86400000)::float8)
  end $$;

create table turn_latency_rollups (
  workflow_id bigint not null,
  -- floor(epoch(at) / 86400)
  day integer not null,
  -- analytics_latency_bucket(latency_ms.total)
  latency integer not null,
  tenant_id bigint not null,
  turns integer not null,
  primary key (workflow_id, day, latency)
);

-- A statement's turns entering (sign 1) or leaving (-1) the counts: agent turns with a total, by their run's
-- workflow. Turns are inserted in batches and deleted by an erasure; they are not updated, and an update
-- is followed as its old rows leaving and its new ones entering.
create function analytics_latency_apply(sign integer, ts turns[]) returns void language sql as $$
  insert into turn_latency_rollups as r (workflow_id, day, latency, tenant_id, turns)
  select ru.workflow_id, floor(extract(epoch from t.at) / 86400)::int,
    analytics_latency_bucket(t.latency_ms), min(t.tenant_id), sign * count(*)::int
  from unnest(ts) t
  join runs ru on ru.id = t.run_id
  where t.speaker = 'agent' and analytics_latency_bucket(t.latency_ms) is not null
  group by 1, 2, 3
  order by 1, 2, 3
  on conflict (workflow_id, day, latency) do update set turns = r.turns + excluded.turns $$;

create function analytics_turns_changed() returns trigger language plpgsql as $$
declare
  o turns[];
  n turns[];
begin
  -- Text turns (no latency) cost this one scan of the statement's rows.
  if tg_op in ('UPDATE', 'DELETE') then
    select array_agg(x) into o from old_rows x where x.speaker = 'agent' and x.latency_ms is not null;
  end if;
  if tg_op in ('UPDATE', 'INSERT') then
    select array_agg(x) into n from new_rows x where x.speaker = 'agent' and x.latency_ms is not null;
  end if;
  if o is not null then perform analytics_latency_apply(-1, o); end if;
  if n is not null then perform analytics_latency_apply(1, n); end if;
  return null;
end $$;

create trigger turns_latency_ins after insert on turns referencing new table as new_rows
  for each statement execute function analytics_turns_changed();
create trigger turns_latency_upd after update on turns referencing old table as old_rows new table as new_rows
  for each statement execute function analytics_turns_changed();
create trigger turns_latency_del after delete on turns referencing old table as old_rows
  for each statement execute function analytics_turns_changed();

insert into turn_latency_rollups (workflow_id, day, latency, tenant_id, turns)
select ru.workflow_id, floor(extract(epoch from t.at) / 86400)::int,
  analytics_latency_bucket(t.latency_ms), min(t.tenant_id), count(*)::int
from turns t join runs ru on ru.id = t.run_id
where t.speaker = 'agent' and analytics_latency_bucket(t.latency_ms) is not null
group by 1, 2, 3;

create table analytics_funnel_totals (
  workflow_id bigint primary key,
  dialed bigint not null,
  answered bigint not null,
  human bigint not null,
  talked bigint not null,
  agreed bigint not null
);

-- A target row counts at a step while it has a first call there: the statement's rows leaving (o) and entering
-- (n), summed per workflow without pairing them (a join of transition tables has no index to go by); most
-- updates move a last call later, sum to nothing and write nothing.
create function analytics_funnel_apply(o analytics_targets[], n analytics_targets[]) returns void language sql as $$
  insert into analytics_funnel_totals as f (workflow_id, dialed, answered, human, talked, agreed)
  select workflow_id, sum(sign), sum(sign * answered), sum(sign * human), sum(sign * talked), sum(sign * agreed)
  from (
    select -1 as sign, t.workflow_id, (t.first_answered_at is not null)::int as answered,
      (t.first_human_at is not null)::int as human, (t.first_talked_at is not null)::int as talked,
      (t.first_agreed_at is not null)::int as agreed
    from unnest(o) t
    union all
    select 1, t.workflow_id, (t.first_answered_at is not null)::int, (t.first_human_at is not null)::int,
      (t.first_talked_at is not null)::int, (t.first_agreed_at is not null)::int
    from unnest(n) t
  ) x
  group by 1
  having sum(sign) <> 0 or sum(sign * answered) <> 0 or sum(sign * human) <> 0 or sum(sign * talked) <> 0
    or sum(sign * agreed) <> 0
  order by 1
  on conflict (workflow_id) do update set dialed = f.dialed + excluded.dialed,
    answered = f.answered + excluded.answered, human = f.human + excluded.human,
    talked = f.talked + excluded.talked, agreed = f.agreed + excluded.agreed $$;

create function analytics_targets_changed() returns trigger language plpgsql as $$
declare
  o analytics_targets[];
  n analytics_targets[];
begin
  if tg_op in ('UPDATE', 'DELETE') then select array_agg(x) into o from old_rows x; end if;
  if tg_op in ('UPDATE', 'INSERT') then select array_agg(x) into n from new_rows x; end if;
  perform analytics_funnel_apply(o, n);
  return null;
end $$;

create trigger analytics_targets_funnel_ins after insert on analytics_targets referencing new table as new_rows
  for each statement execute function analytics_targets_changed();
create trigger analytics_targets_funnel_upd after update on analytics_targets
  referencing old table as old_rows new table as new_rows
  for each statement execute function analytics_targets_changed();
create trigger analytics_targets_funnel_del after delete on analytics_targets referencing old table as old_rows
  for each statement execute function analytics_targets_changed();

insert into analytics_funnel_totals (workflow_id, dialed, answered, human, talked, agreed)
select workflow_id, count(*), count(first_answered_at), count(first_human_at), count(first_talked_at),
  count(first_agreed_at)
from analytics_targets
group by 1;

-- The whole-history test (every target's first call at or after the range's start, its last before the end)
-- is two index probes; the partial range's rows are the targets whose last call is not before it.
drop index analytics_targets_workflow_idx;
create index analytics_targets_first_idx on analytics_targets (workflow_id, first_dialed_at);
create index analytics_targets_last_idx on analytics_targets (workflow_id, last_dialed_at) include (first_dialed_at,
  first_answered_at, last_answered_at, first_human_at, last_human_at, first_talked_at, last_talked_at,
  first_agreed_at, last_agreed_at);
