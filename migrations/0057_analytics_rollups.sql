-- Campaign analytics kept as calls change (GET /api/workflows/{id}/analytics, src/analytics/): ended calls
-- summed per workflow and 15-minute slot of started_at, by number prefix (call_rollups_grid) and by outcome
-- (call_rollups_outcomes), the audience counted per workflow (audience_counts), and each
-- target's first and last calls reaching each funnel step (analytics_targets), maintained by triggers on calls and
-- call_analyses so every writer is covered. Calls still in progress (outcome null) are not rolled up: they
-- are few, read from calls by calls_in_progress_idx, and the dial and answer writes stay off the shared rows.
-- The constants mirror src/analytics/analytics.repo.ts: SLOT_SECONDS 900, ZONE_PREFIX_CHARS 5, TALKED_SECONDS
-- 30, VOICEMAIL_OUTCOMES and AGREED_OUTCOMES.

-- Each view reads a rollup of its own grouping: the weekday × hour grid by slot and prefix, the days and spend
-- by slot and outcome (slots, not days, so a range's whole slots are read from here and only its partial
-- slots from calls).
create table call_rollups_grid (
  workflow_id bigint not null,
  -- floor(epoch(started_at) / 900)
  slot integer not null,
  -- left(phone_e164, 5)
  prefix text not null,
  tenant_id bigint not null,
  -- a number of the prefix with its other digits masked, to find the zone by (no callee's number is kept)
  sample text not null,
  dials integer not null,
  connects integer not null,
  primary key (workflow_id, slot, prefix)
) with (fillfactor = 80);

create table call_rollups_outcomes (
  workflow_id bigint not null,
  slot integer not null,
  outcome text not null,
  tenant_id bigint not null,
  calls integer not null,
  cost_minor bigint not null,
  -- the answered calls' analyses' charges
  analysis_minor bigint not null,
  primary key (workflow_id, slot, outcome)
) with (fillfactor = 80);

-- A workflow's audience counted (the funnel's first step), kept by a statement trigger on audience_targets.
create table audience_counts (
  workflow_id bigint primary key,
  targets bigint not null
);

create table analytics_targets (
  workflow_id bigint not null,
  target_id bigint not null,
  tenant_id bigint not null,
  -- started_at of the target's first and last calls, and of its first and last calls reaching each step
  first_dialed_at timestamptz not null,
  last_dialed_at timestamptz not null,
  first_answered_at timestamptz,
  last_answered_at timestamptz,
  first_human_at timestamptz,
  last_human_at timestamptz,
  first_talked_at timestamptz,
  last_talked_at timestamptz,
  first_agreed_at timestamptz,
  last_agreed_at timestamptz,
  primary key (workflow_id, target_id)
);

-- A target's calls, to count it again when a call loses a step (a delete, a changed outcome).
create index calls_target_idx on calls (target_id);
-- A workflow's targets, read whole (a step's first or last call in range is a call in range).
create index analytics_targets_workflow_idx on analytics_targets (workflow_id) include (first_dialed_at,
  last_dialed_at, first_answered_at, last_answered_at, first_human_at, last_human_at, first_talked_at,
  last_talked_at, first_agreed_at, last_agreed_at);
-- The calls a rollup does not hold yet.
create index calls_in_progress_idx on calls (workflow_id, started_at) where outcome is null;

create function analytics_sample(phone text) returns text language sql immutable as $$
  select left(phone, 5) || translate(substr(phone, 6), '0123456789', '5555555555') $$;
create function analytics_human(outcome text, answered boolean) returns boolean language sql immutable as $$
  select answered and not coalesce(outcome in ('voicemail', 'voicemail_left'), false) $$;
create function analytics_talked(outcome text, answered boolean, secs integer) returns boolean
  language sql immutable as $$
  select answered and not coalesce(outcome in ('voicemail', 'voicemail_left'), false) and coalesce(secs >= 30,
    false) $$;
create function analytics_agreed(outcome text, answered boolean, goal_met boolean) returns boolean
  language sql immutable as $$
  select answered and (coalesce(outcome in ('agreed', 'agreed_with_concession', 'agreed_after_call'), false)
    or coalesce(goal_met, false)) $$;

-- A call's state (with its analysis's) leaving (sign -1) or entering (+1) the figures.
create type analytics_change as (
  sign integer,
  call_id bigint,
  workflow_id bigint,
  tenant_id bigint,
  target_id bigint,
  started_at timestamptz,
  phone text,
  outcome text,
  answered boolean,
  connected_seconds integer,
  cost_minor bigint,
  goal_met boolean,
  charged_minor bigint
);

-- Applies a statement's changes: the rollup rows' sums moved (in key order, so concurrent writers lock
-- shared rows in one order), the targets' first steps lowered and last ones raised, and a target whose
-- call lost a step (or was deleted, or moved) counted again from its calls, leaving out the deleted ones.
create function analytics_apply(cs analytics_change[]) returns void language plpgsql as $$
declare
  lost_w bigint[];
  lost_t bigint[];
  gone bigint[];
begin
  insert into call_rollups_grid as r (workflow_id, slot, prefix, tenant_id, sample, dials, connects)
  select c.workflow_id, floor(extract(epoch from c.started_at) / 900)::int, left(c.phone, 5), min(c.tenant_id),
    min(analytics_sample(c.phone)), sum(c.sign)::int, sum(c.sign * c.answered::int)::int
  from unnest(cs) c
  where c.outcome is not null
  group by 1, 2, 3
  having sum(c.sign) <> 0 or sum(c.sign * c.answered::int) <> 0
  order by 1, 2, 3
  on conflict (workflow_id, slot, prefix) do update set dials = r.dials + excluded.dials,
    connects = r.connects + excluded.connects;

  insert into call_rollups_outcomes as r (workflow_id, slot, outcome, tenant_id, calls, cost_minor, analysis_minor)
  select c.workflow_id, floor(extract(epoch from c.started_at) / 900)::int, c.outcome, min(c.tenant_id),
    sum(c.sign)::int, coalesce(sum(c.sign * c.cost_minor), 0)::bigint,
    coalesce(sum(c.sign * c.charged_minor) filter (where c.answered), 0)::bigint
  from unnest(cs) c
  where c.outcome is not null
  group by 1, 2, 3
  having sum(c.sign) <> 0 or coalesce(sum(c.sign * c.cost_minor), 0) <> 0
    or coalesce(sum(c.sign * c.charged_minor) filter (where c.answered), 0) <> 0
  order by 1, 2, 3
  on conflict (workflow_id, slot, outcome) do update set calls = r.calls + excluded.calls,
    cost_minor = r.cost_minor + excluded.cost_minor, analysis_minor = r.analysis_minor + excluded.analysis_minor;

  insert into analytics_targets as t (workflow_id, target_id, tenant_id, first_dialed_at, last_dialed_at,
    first_answered_at, last_answered_at, first_human_at, last_human_at, first_talked_at, last_talked_at,
    first_agreed_at, last_agreed_at)
  select c.workflow_id, c.target_id, min(c.tenant_id),
    min(c.started_at), max(c.started_at),
    min(c.started_at) filter (where c.answered),
    max(c.started_at) filter (where c.answered),
    min(c.started_at) filter (where analytics_human(c.outcome, c.answered)),
    max(c.started_at) filter (where analytics_human(c.outcome, c.answered)),
    min(c.started_at) filter (where analytics_talked(c.outcome, c.answered, c.connected_seconds)),
    max(c.started_at) filter (where analytics_talked(c.outcome, c.answered, c.connected_seconds)),
    min(c.started_at) filter (where analytics_agreed(c.outcome, c.answered, c.goal_met)),
    max(c.started_at) filter (where analytics_agreed(c.outcome, c.answered, c.goal_met))
  from unnest(cs) c
  where c.sign = 1
  group by 1, 2
  order by 1, 2
  on conflict (workflow_id, target_id) do update set
    first_dialed_at = least(t.first_dialed_at, excluded.first_dialed_at),
    last_dialed_at = greatest(t.last_dialed_at, excluded.last_dialed_at),
    first_answered_at = least(t.first_answered_at, excluded.first_answered_at),
    last_answered_at = greatest(t.last_answered_at, excluded.last_answered_at),
    first_human_at = least(t.first_human_at, excluded.first_human_at),
    last_human_at = greatest(t.last_human_at, excluded.last_human_at),
    first_talked_at = least(t.first_talked_at, excluded.first_talked_at),
    last_talked_at = greatest(t.last_talked_at, excluded.last_talked_at),
    first_agreed_at = least(t.first_agreed_at, excluded.first_agreed_at),
    last_agreed_at = greatest(t.last_agreed_at, excluded.last_agreed_at)
  -- nothing written when nothing moved (most calls' ends)
  where excluded.first_dialed_at < t.first_dialed_at or excluded.last_dialed_at > t.last_dialed_at
    or excluded.first_answered_at < t.first_answered_at
    or t.first_answered_at is null and excluded.first_answered_at is not null
    or excluded.last_answered_at > t.last_answered_at
    or t.last_answered_at is null and excluded.last_answered_at is not null
    or excluded.first_human_at < t.first_human_at
    or t.first_human_at is null and excluded.first_human_at is not null
    or excluded.last_human_at > t.last_human_at
    or t.last_human_at is null and excluded.last_human_at is not null
    or excluded.first_talked_at < t.first_talked_at
    or t.first_talked_at is null and excluded.first_talked_at is not null
    or excluded.last_talked_at > t.last_talked_at
    or t.last_talked_at is null and excluded.last_talked_at is not null
    or excluded.first_agreed_at < t.first_agreed_at
    or t.first_agreed_at is null and excluded.first_agreed_at is not null
    or excluded.last_agreed_at > t.last_agreed_at
    or t.last_agreed_at is null and excluded.last_agreed_at is not null;

  -- Each call's state before and after (grouped by call, not joined: a statement may change many).
  select array_agg((p.o).workflow_id order by (p.o).workflow_id, (p.o).target_id),
    array_agg((p.o).target_id order by (p.o).workflow_id, (p.o).target_id),
    array_agg((p.o).call_id) filter (where (p.n).call_id is null)
  into lost_w, lost_t, gone
  from (
    select (array_agg(c) filter (where c.sign = -1))[1] as o, (array_agg(c) filter (where c.sign = 1))[1] as n
    from unnest(cs) c
    group by c.call_id
  ) p
  where (p.o).call_id is not null and ((p.n).call_id is null or (p.n).workflow_id <> (p.o).workflow_id
    or (p.n).target_id <> (p.o).target_id or (p.n).started_at <> (p.o).started_at
    or ((p.o).answered and not (p.n).answered)
    or (analytics_human((p.o).outcome, (p.o).answered) and not analytics_human((p.n).outcome, (p.n).answered))
    or (analytics_talked((p.o).outcome, (p.o).answered, (p.o).connected_seconds)
      and not analytics_talked((p.n).outcome, (p.n).answered, (p.n).connected_seconds))
    or (analytics_agreed((p.o).outcome, (p.o).answered, (p.o).goal_met)
      and not analytics_agreed((p.n).outcome, (p.n).answered, (p.n).goal_met)));
  if lost_t is null then return; end if;
  delete from analytics_targets t using unnest(lost_w, lost_t) l(w, t)
  where t.workflow_id = l.w and t.target_id = l.t;
  insert into analytics_targets (workflow_id, target_id, tenant_id, first_dialed_at, last_dialed_at, first_answered_at,
    last_answered_at, first_human_at, last_human_at, first_talked_at, last_talked_at, first_agreed_at, last_agreed_at)
  select c.workflow_id, c.target_id, min(c.tenant_id),
    min(c.started_at), max(c.started_at),
    min(c.started_at) filter (where c.answered_at is not null),
    max(c.started_at) filter (where c.answered_at is not null),
    min(c.started_at) filter (where analytics_human(c.outcome, c.answered_at is not null)),
    max(c.started_at) filter (where analytics_human(c.outcome, c.answered_at is not null)),
    min(c.started_at) filter (where analytics_talked(c.outcome, c.answered_at is not null, c.connected_seconds)),
    max(c.started_at) filter (where analytics_talked(c.outcome, c.answered_at is not null, c.connected_seconds)),
    min(c.started_at) filter (where analytics_agreed(c.outcome, c.answered_at is not null, ca.goal_met)),
    max(c.started_at) filter (where analytics_agreed(c.outcome, c.answered_at is not null, ca.goal_met))
  from calls c left join call_analyses ca on ca.call_id = c.id
  where c.target_id = any(lost_t) and c.id <> all(coalesce(gone, '{}'))
    and (c.workflow_id, c.target_id) in (select * from unnest(lost_w, lost_t))
  group by 1, 2
  order by 1, 2
  on conflict (workflow_id, target_id) do nothing;
end $$;

create function analytics_calls_changed() returns trigger language plpgsql as $$
declare cs analytics_change[];
begin
  if tg_op = 'INSERT' then
    select array_agg(row(1, n.id, n.workflow_id, n.tenant_id, n.target_id, n.started_at, n.phone_e164, n.outcome,
      n.answered_at is not null, n.connected_seconds, n.cost_minor, null, null)::analytics_change)
    into cs from new_rows n;
  elsif tg_op = 'UPDATE' then
    -- Only the columns the figures read: other updates (owner, hang-up state, provider ids) cost this one query.
    with moved as (
      select o.id from old_rows o join new_rows n on n.id = o.id
      where (o.workflow_id, o.target_id, o.started_at, left(o.phone_e164, 5), o.outcome, o.answered_at is null,
          o.connected_seconds, o.cost_minor)
        is distinct from (n.workflow_id, n.target_id, n.started_at, left(n.phone_e164, 5), n.outcome,
          n.answered_at is null, n.connected_seconds, n.cost_minor))
    select array_agg(x) into cs from (
      select row(-1, o.id, o.workflow_id, o.tenant_id, o.target_id, o.started_at, o.phone_e164, o.outcome,
        o.answered_at is not null, o.connected_seconds, o.cost_minor, ca.goal_met, ca.charged_minor)::analytics_change
      from old_rows o join moved m on m.id = o.id left join call_analyses ca on ca.call_id = o.id
      union all
      select row(1, n.id, n.workflow_id, n.tenant_id, n.target_id, n.started_at, n.phone_e164, n.outcome,
        n.answered_at is not null, n.connected_seconds, n.cost_minor, ca.goal_met, ca.charged_minor)::analytics_change
      from new_rows n join moved m on m.id = n.id left join call_analyses ca on ca.call_id = n.id
    ) y(x);
  end if;
  if cs is not null then perform analytics_apply(cs); end if;
  return null;
end $$;

-- Before the delete, row by row: its analysis (deleted by the cascade after the row) is still there to
-- subtract. Calls are not deleted by the application; this keeps the figures right if an operator does.
create function analytics_call_deleting() returns trigger language plpgsql as $$
declare a call_analyses;
begin
  select * into a from call_analyses where call_id = old.id;
  perform analytics_apply(array[row(-1, old.id, old.workflow_id, old.tenant_id, old.target_id, old.started_at,
    old.phone_e164, old.outcome, old.answered_at is not null, old.connected_seconds, old.cost_minor, a.goal_met,
    a.charged_minor)::analytics_change]);
  return old;
end $$;

-- An analysis's goal_met and charge, for the call it belongs to (none when the call is being deleted).
create function analytics_analyses_changed() returns trigger language plpgsql as $$
declare
  ids bigint[];
  og boolean[];
  oc bigint[];
  ng boolean[];
  nc bigint[];
  cs analytics_change[];
begin
  if tg_op = 'INSERT' then
    select array_agg(n.call_id), array_agg(null::boolean), array_agg(null::bigint), array_agg(n.goal_met),
      array_agg(n.charged_minor)
    into ids, og, oc, ng, nc from new_rows n where n.goal_met is not null or n.charged_minor is not null;
  elsif tg_op = 'UPDATE' then
    select array_agg(n.call_id), array_agg(o.goal_met), array_agg(o.charged_minor), array_agg(n.goal_met),
      array_agg(n.charged_minor)
    into ids, og, oc, ng, nc from old_rows o join new_rows n on n.call_id = o.call_id
    where (o.goal_met, o.charged_minor) is distinct from (n.goal_met, n.charged_minor);
  else
    select array_agg(o.call_id), array_agg(o.goal_met), array_agg(o.charged_minor), array_agg(null::boolean),
      array_agg(null::bigint)
    into ids, og, oc, ng, nc from old_rows o where o.goal_met is not null or o.charged_minor is not null;
  end if;
  if ids is null then return null; end if;
  select array_agg(x) into cs from (
    select row(s.sign, c.id, c.workflow_id, c.tenant_id, c.target_id, c.started_at, c.phone_e164, c.outcome,
      c.answered_at is not null, c.connected_seconds, c.cost_minor, s.goal_met, s.charged_minor)::analytics_change
    from unnest(ids, og, oc, ng, nc) p(call_id, og, oc, ng, nc)
    join calls c on c.id = p.call_id
    cross join lateral (values (-1, p.og, p.oc), (1, p.ng, p.nc)) s(sign, goal_met, charged_minor)
  ) y(x);
  if cs is not null then perform analytics_apply(cs); end if;
  return null;
end $$;

create trigger calls_analytics_ins after insert on calls referencing new table as new_rows
  for each statement execute function analytics_calls_changed();
create trigger calls_analytics_upd after update on calls referencing old table as old_rows new table as new_rows
  for each statement execute function analytics_calls_changed();
create trigger calls_analytics_del before delete on calls for each row execute function analytics_call_deleting();
create trigger call_analyses_analytics_ins after insert on call_analyses referencing new table as new_rows
  for each statement execute function analytics_analyses_changed();
create trigger call_analyses_analytics_upd after update on call_analyses
  referencing old table as old_rows new table as new_rows
  for each statement execute function analytics_analyses_changed();
create trigger call_analyses_analytics_del after delete on call_analyses referencing old table as old_rows
  for each statement execute function analytics_analyses_changed();

-- The audience's count follows its rows (an upload is one statement; an erasure deletes a row; an update
-- not moving a row to another workflow writes nothing).
create function analytics_audience_changed() returns trigger language plpgsql as $$
declare
  ws bigint[];
  ns bigint[];
begin
  if tg_op = 'INSERT' then
    select array_agg(workflow_id order by workflow_id), array_agg(n order by workflow_id) into ws, ns
    from (select workflow_id, count(*) as n from new_rows group by 1) d;
  elsif tg_op = 'DELETE' then
    select array_agg(workflow_id order by workflow_id), array_agg(n order by workflow_id) into ws, ns
    from (select workflow_id, -count(*) as n from old_rows group by 1) d;
  else
    select array_agg(workflow_id order by workflow_id), array_agg(n order by workflow_id) into ws, ns
    from (
      select workflow_id, sum(n) as n
      from (select workflow_id, -1 as n from old_rows union all select workflow_id, 1 from new_rows) x
      group by 1 having sum(n) <> 0
    ) d;
  end if;
  if ws is null then return null; end if;
  insert into audience_counts as a (workflow_id, targets)
  select w, n from unnest(ws, ns) d(w, n)
  on conflict (workflow_id) do update set targets = a.targets + excluded.targets;
  return null;
end $$;

create trigger audience_targets_count_ins after insert on audience_targets referencing new table as new_rows
  for each statement execute function analytics_audience_changed();
create trigger audience_targets_count_upd after update on audience_targets
  referencing old table as old_rows new table as new_rows
  for each statement execute function analytics_audience_changed();
create trigger audience_targets_count_del after delete on audience_targets referencing old table as old_rows
  for each statement execute function analytics_audience_changed();

-- The calls already there.
insert into call_rollups_grid (workflow_id, slot, prefix, tenant_id, sample, dials, connects)
select c.workflow_id, floor(extract(epoch from c.started_at) / 900)::int, left(c.phone_e164, 5), min(c.tenant_id),
  min(analytics_sample(c.phone_e164)), count(*)::int, count(c.answered_at)::int
from calls c
where c.outcome is not null
group by 1, 2, 3;
insert into call_rollups_outcomes (workflow_id, slot, outcome, tenant_id, calls, cost_minor, analysis_minor)
select c.workflow_id, floor(extract(epoch from c.started_at) / 900)::int, c.outcome, min(c.tenant_id),
  count(*)::int, coalesce(sum(c.cost_minor), 0)::bigint,
  coalesce(sum(ca.charged_minor) filter (where c.answered_at is not null), 0)::bigint
from calls c left join call_analyses ca on ca.call_id = c.id
where c.outcome is not null
group by 1, 2, 3;
insert into audience_counts (workflow_id, targets)
select workflow_id, count(*) from audience_targets group by 1;
insert into analytics_targets (workflow_id, target_id, tenant_id, first_dialed_at, last_dialed_at, first_answered_at,
  last_answered_at, first_human_at, last_human_at, first_talked_at, last_talked_at, first_agreed_at, last_agreed_at)
select c.workflow_id, c.target_id, min(c.tenant_id),
  min(c.started_at), max(c.started_at),
  min(c.started_at) filter (where c.answered_at is not null),
  max(c.started_at) filter (where c.answered_at is not null),
  min(c.started_at) filter (where analytics_human(c.outcome, c.answered_at is not null)),
  max(c.started_at) filter (where analytics_human(c.outcome, c.answered_at is not null)),
  min(c.started_at) filter (where analytics_talked(c.outcome, c.answered_at is not null, c.connected_seconds)),
  max(c.started_at) filter (where analytics_talked(c.outcome, c.answered_at is not null, c.connected_seconds)),
  min(c.started_at) filter (where analytics_agreed(c.outcome, c.answered_at is not null, ca.goal_met)),
  max(c.started_at) filter (where analytics_agreed(c.outcome, c.answered_at is not null, ca.goal_met))
from calls c left join call_analyses ca on ca.call_id = c.id
group by 1, 2;
