-- Experiments (issue 39): a workflow's calls split between two to four arms, each a variant of its
-- rule book, persona or voice. A target's arm is a seeded hash of it (src/experiments/assignment.ts),
-- so its retries stay in its arm; each call keeps the experiment and arm it was placed in.
create table experiments (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint not null references workflows (id),
  name text not null check (length(name) between 1 and 100),
  -- what the targets' hash is seeded with
  seed bigint not null,
  status text not null default 'running' check (status in ('running', 'ended')),
  -- [{name, weight, stopped_at, persona, voice, rule_book}]: rule_book holds only what the arm changes
  arms jsonb not null,
  -- the arm whose variant became the workflow's (its rule book version, persona and voice)
  promoted_arm text,
  promoted_rule_book_id bigint references rule_books (id),
  -- a rehearsal's copy: the workflow's experiment it rehearses
  rehearses bigint references experiments (id),
  created_by_user_id bigint,
  created_at timestamptz not null default now(),
  ended_at timestamptz
);
-- One running experiment per workflow: a run's calls follow it.
create unique index experiments_running_idx on experiments (workflow_id) where status = 'running';
create index experiments_workflow_idx on experiments (workflow_id, id desc);

alter table calls add column experiment_id bigint references experiments (id), add column arm text;
create index calls_experiment_idx on calls (experiment_id, arm, target_id) where experiment_id is not null;

-- dial_begin_attempts (0026) writes each call's experiment and arm from its decision (the dialer
-- assigned them): the same batch, the same round trip.
create or replace function dial_begin_attempts(
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
    v_d := p_decisions -> (i - 1);
    insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
      owner_instance, slot_owner, experiment_id, arm)
    values (p_tenant_id, p_run_id, p_workflow_id, p_run_target_ids[i], v_target, v_attempts, v_phone, p_provider,
      p_me, p_me, (v_d ->> 'experiment_id')::bigint, v_d ->> 'arm')
    returning id into v_call;
    update run_targets set last_call_id = v_call where id = p_run_target_ids[i];
    if p_record_contact then
      insert into recent_contacts (tenant_id, phone_e164, last_contacted_at) values (p_tenant_id, v_phone, now())
      on conflict (tenant_id, phone_e164) do update set last_contacted_at = excluded.last_contacted_at;
    end if;
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
