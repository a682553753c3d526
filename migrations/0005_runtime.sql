-- The call runtime: run ownership (a lease renewed by the owning runtime process) and persisted
-- actor snapshots, each run's targets, every dial attempt (calls), transcript turns, the dialer's
-- decision log, approvals, and concurrency slots held as leases.

alter table runs
  add column pause_reason text check (pause_reason in ('user', 'insufficient_funds')),
  add column end_reason text,
  add column owner_instance text,
  add column lease_expires_at timestamptz,
  add column snapshot jsonb,
  add column machine_version integer,
  -- the last turn seq handed out in this run (turns.seq is strictly increasing per run).
  add column turn_seq bigint not null default 0,
  add column targets_queued integer not null default 0,
  add column updated_at timestamptz not null default now();
-- Runtime processes look for runs to take over: running or pausing runs whose lease lapsed.
create index runs_claimable_idx on runs (lease_expires_at) where status in ('running', 'paused');

-- One row per audience target per run: where the dialer stands with it.
create table run_targets (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  run_id bigint not null references runs (id),
  target_id bigint not null references audience_targets (id),
  phone_e164 text not null,
  -- queued: never dialed; waiting: a retry or the calling window is due at next_attempt_at;
  -- dialing: an attempt is in flight (calls row); done: a final outcome; skipped: never dialed, and never will be.
  status text not null default 'queued' check (status in ('queued', 'waiting', 'dialing', 'done', 'skipped')),
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  outcome text,
  last_call_id bigint,
  updated_at timestamptz not null default now(),
  unique (run_id, target_id)
);
create index run_targets_due_idx on run_targets (run_id, next_attempt_at, id) where status in ('queued', 'waiting');

-- Every dial attempt. The row is written (with the target marked dialing) before the carrier is
-- asked, so a process that takes a run over never dials the same attempt again.
create table calls (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  run_id bigint not null references runs (id),
  workflow_id bigint not null references workflows (id),
  run_target_id bigint not null references run_targets (id),
  target_id bigint not null references audience_targets (id),
  attempt integer not null check (attempt >= 1),
  phone_e164 text not null,
  provider text not null,
  provider_call_id text,
  status text not null default 'dialing' check (status in ('dialing', 'connected', 'ended')),
  outcome text,
  owner_instance text not null,
  reserved_minor bigint,
  cost_minor bigint,
  connected_seconds integer,
  started_at timestamptz not null default now(),
  answered_at timestamptz,
  ended_at timestamptz,
  unique (run_target_id, attempt)
);
create index calls_run_idx on calls (run_id, id);
create index calls_open_idx on calls (run_id) where status <> 'ended';

create table turns (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  run_id bigint not null references runs (id),
  target_id bigint not null,
  call_id bigint references calls (id),
  seq bigint not null,
  turn_index integer not null,
  speaker text not null check (speaker in ('agent', 'callee', 'system')),
  text text not null,
  outcome_id text,
  at timestamptz not null,
  unique (run_id, seq)
);
create index turns_run_target_idx on turns (run_id, target_id, seq);
create unique index turns_call_index_idx on turns (call_id, turn_index) where call_id is not null;

-- Why the dialer dialed, held, retried, skipped or stopped each target, and at what cost.
create table dial_decisions (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  run_id bigint not null references runs (id),
  target_id bigint not null,
  call_id bigint,
  decision text not null check (decision in ('dial', 'skip', 'hold', 'retry', 'stop')),
  reason text not null,
  detail jsonb not null default '{}'::jsonb,
  cost_minor bigint,
  at timestamptz not null default now()
);
create index dial_decisions_run_idx on dial_decisions (run_id, target_id, id);

create table approvals (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint not null references workflows (id),
  run_id bigint references runs (id),
  call_id bigint references calls (id),
  target_phone text,
  proposed_action text not null check (proposed_action in ('concession', 'callback', 'escalate')),
  proposed_value_minor bigint,
  currency text not null check (currency in ('INR', 'USD')),
  rationale text,
  context jsonb not null default '{}'::jsonb,
  status text not null default 'pending' check (status in ('pending', 'approved', 'denied', 'expired')),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  decided_at timestamptz,
  decided_by bigint references users (id),
  note text check (length(note) <= 500),
  snapshot jsonb,
  machine_version integer
);
create index approvals_tenant_idx on approvals (tenant_id, status, id desc);
create index approvals_pending_idx on approvals (expires_at) where status = 'pending';

-- A concurrency slot per call in flight, so per-tenant caps hold across runtime processes. The
-- owner renews its slots with its run leases; a dead owner's slots lapse and are reclaimed.
create table dial_slots (
  call_id bigint primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint not null,
  owner_instance text not null,
  expires_at timestamptz not null
);
create index dial_slots_tenant_idx on dial_slots (tenant_id, expires_at);
