-- Simulation campaigns: a rehearsal of a workflow against simulated callees, run by the real
-- runtime. Each campaign has a hidden workflow of its own (simulation_of names the rehearsed one:
-- same rule book, persona and voice) holding its simulated audience and its one run, so nothing
-- touches the rehearsed workflow's audience, status or runs. Written by src/sim/campaigns.repo.ts
-- (sim_campaigns) and the workflows, audience and runs repositories (the hidden workflow's rows).
alter table workflows add column simulation_of bigint references workflows (id);
create index workflows_simulation_idx on workflows (simulation_of) where simulation_of is not null;

create table sim_campaigns (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  -- the rehearsed workflow
  workflow_id bigint not null references workflows (id),
  -- the hidden workflow and its run
  sim_workflow_id bigint not null references workflows (id),
  run_id bigint references runs (id),
  state text not null check (state in ('ready', 'running', 'awaiting_answer', 'completed', 'stopped', 'failed')),
  size integer not null check (size between 1 and 500),
  batch_size integer not null check (batch_size between 1 and 100),
  seed bigint not null,
  time_scale real,
  -- {<sim persona id>: weight}
  mix jsonb not null,
  -- how many simulated callees have been handed to the dialer so far
  released integer not null default 0,
  failure text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  ended_at timestamptz
);
create index sim_campaigns_tenant_idx on sim_campaigns (tenant_id, id desc);
create index sim_campaigns_active_idx on sim_campaigns (tenant_id) where state in ('ready', 'running', 'awaiting_answer');
