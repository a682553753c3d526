-- The dial ramp and limits that belong to the account (issue 21, items 3 and 4).
--
-- 1. Dial slots are counted in one row per (workspace, runtime process) instead of one lease row
--    per call counted under a lock. A process's row is leased like its runs (renewed with them), so
--    the slots of a process that died stop counting when its lease lapses. A call remembers the row
--    it was counted in (calls.slot_owner): its end gives the slot back there, whoever finishes it.
-- 2. dial_begin_attempts: a batch of attempts of one run in one round trip (the run's ownership,
--    the workspace's slot cap, the target, the call row, the cool-down record and the decision),
--    so the locks it takes are held for server time only.
-- 3. Pacing and concurrency caps of a workspace: its plan's (dial_plans, by tenants.plan_tier)
--    unless an admin set its own (tenant_dial_limits). The DIALER_* settings cap both.

create table dial_slot_counts (
  tenant_id bigint not null references tenants (id) on delete cascade,
  owner_instance text not null,
  in_use integer not null default 0 check (in_use >= 0),
  expires_at timestamptz not null,
  primary key (tenant_id, owner_instance)
);
create index dial_slot_counts_owner_idx on dial_slot_counts (owner_instance);

alter table calls add column slot_owner text;

create table dial_plans (
  plan_tier text primary key check (plan_tier in ('free', 'all_inclusive', 'byok')),
  calls_per_second numeric not null check (calls_per_second > 0),
  max_concurrent_calls integer not null check (max_concurrent_calls > 0),
  max_concurrent_per_workflow integer not null check (max_concurrent_per_workflow > 0)
);
insert into dial_plans (plan_tier, calls_per_second, max_concurrent_calls, max_concurrent_per_workflow) values
  ('free', 100, 1000, 1000),
  ('all_inclusive', 200, 10000, 10000),
  ('byok', 200, 10000, 10000);

create table tenant_dial_limits (
  tenant_id bigint primary key references tenants (id) on delete cascade,
  calls_per_second numeric check (calls_per_second > 0 and calls_per_second <= 100000),
  max_concurrent_calls integer check (max_concurrent_calls > 0),
  max_concurrent_per_workflow integer check (max_concurrent_per_workflow > 0),
  updated_at timestamptz not null default now()
);

-- One batch of attempts of one run. p_decisions is a JSON array in the order of p_run_target_ids:
-- {target_id, decision, reason, detail, cost_minor, at (epoch ms)}. A row per target: the call when
-- it began, else why not (not_owner, not_due, tenant_cap). The workspace's slots are decided under
-- its advisory lock, held only while this one statement runs.
create function dial_begin_attempts(
  p_run_id bigint,
  p_me text,
  p_tenant_id bigint,
  p_workflow_id bigint,
  p_provider text,
  p_tenant_cap integer,
  p_slot_lease_ms integer,
  p_record_contact boolean,
  p_run_target_ids bigint[],
  p_decisions jsonb
)
returns table (o_run_target_id bigint, o_call_id bigint, o_attempt integer, o_target_id bigint, o_phone text,
  o_refusal text)
language plpgsql as $$
declare
  v_room integer;
  v_granted integer := 0;
  v_attempts integer;
  v_target bigint;
  v_phone text;
  v_call bigint;
  v_d jsonb;
  i integer;
begin
  perform 1 from runs where id = p_run_id and owner_instance = p_me and status = 'running' for share;
  if not found then
    return query select u, null::bigint, null::integer, null::bigint, null::text, 'not_owner'::text
      from unnest(p_run_target_ids) as u;
    return;
  end if;
  perform pg_advisory_xact_lock(hashtextextended('dial_slots:' || p_tenant_id::text, 0));
  select greatest(0, p_tenant_cap - coalesce(sum(c.in_use), 0)) into v_room
    from dial_slot_counts c where c.tenant_id = p_tenant_id and c.expires_at > now();
  for i in 1 .. coalesce(array_length(p_run_target_ids, 1), 0) loop
    o_run_target_id := p_run_target_ids[i];
    o_call_id := null;
    o_attempt := null;
    o_target_id := null;
    o_phone := null;
    if v_granted >= v_room then
      o_refusal := 'tenant_cap';
      return next;
      continue;
    end if;
    update run_targets rt set status = 'dialing', attempts = rt.attempts + 1, updated_at = now()
      where rt.id = p_run_target_ids[i] and rt.run_id = p_run_id and rt.status in ('queued', 'waiting')
      returning rt.attempts, rt.target_id, rt.phone_e164 into v_attempts, v_target, v_phone;
    if not found then
      o_refusal := 'not_due';
      return next;
      continue;
    end if;
    insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
      owner_instance, slot_owner)
    values (p_tenant_id, p_run_id, p_workflow_id, p_run_target_ids[i], v_target, v_attempts, v_phone, p_provider,
      p_me, p_me)
    returning id into v_call;
    update run_targets set last_call_id = v_call where id = p_run_target_ids[i];
    if p_record_contact then
      insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values (p_tenant_id, v_phone, now())
      on conflict (tenant_id, phone_e164) do update set last_contacted_at = excluded.last_contacted_at;
    end if;
    v_d := p_decisions -> (i - 1);
    insert into dial_decisions (tenant_id, run_id, target_id, call_id, decision, reason, detail, cost_minor, at)
    values (p_tenant_id, p_run_id, (v_d ->> 'target_id')::bigint, v_call, v_d ->> 'decision', v_d ->> 'reason',
      coalesce(v_d -> 'detail', '{}'::jsonb) || jsonb_build_object('attempt', v_attempts),
      (v_d ->> 'cost_minor')::bigint, to_timestamp((v_d ->> 'at')::double precision / 1000));
    v_granted := v_granted + 1;
    o_call_id := v_call;
    o_attempt := v_attempts;
    o_target_id := v_target;
    o_phone := v_phone;
    o_refusal := null;
    return next;
  end loop;
  if v_granted > 0 then
    insert into dial_slot_counts as c (tenant_id, owner_instance, in_use, expires_at)
    values (p_tenant_id, p_me, v_granted, now() + p_slot_lease_ms * interval '1 millisecond')
    on conflict (tenant_id, owner_instance) do update
      set in_use = c.in_use + excluded.in_use, expires_at = excluded.expires_at;
  end if;
end
$$;
