-- Post-call analysis (issue 25): one row per connected call of a workflow whose rule book does not
-- turn analysis off, written only by src/analysis/analysis.repo.ts. A runtime process enqueues a
-- pending row for each ended, answered call lacking one, claims pending rows by a lease
-- (locked_until, SKIP LOCKED), and stores the result at most once (the primary key, and a
-- conditional update from pending to done or failed). Calls that never connected get no row.
create table call_analyses (
  call_id bigint primary key references calls (id) on delete cascade,
  tenant_id bigint not null references tenants (id),
  run_id bigint,
  -- the rule book version whose analysis section was read (the run's, else the workflow's)
  rule_book_id bigint,
  status text not null check (status in ('pending', 'done', 'failed')),
  -- attempts made so far (each claim counts one)
  attempts integer not null default 0,
  next_attempt_at timestamptz default now(),
  locked_until timestamptz,
  locked_by text,
  summary text check (length(summary) <= 400),
  goal_met boolean,
  sentiment text check (sentiment in ('positive', 'neutral', 'negative')),
  -- from an approved callback or concession (src/approvals), never from the model's reading
  callback_at timestamptz,
  agreed_value_minor bigint,
  -- the workflow's extracted fields, by name (a field the call did not reveal is null)
  fields jsonb not null default '{}'::jsonb,
  model text,
  model_version text,
  -- the last attempt's failure; kept on a failed row so the failure is visible
  error text,
  -- what the analysis cost the workspace (null: not charged, e.g. the tenant's own model)
  charged_minor bigint,
  analyzed_at timestamptz,
  created_at timestamptz not null default now()
);
create index call_analyses_due_idx on call_analyses (next_attempt_at) where status = 'pending';
create index call_analyses_run_idx on call_analyses (run_id, call_id);

-- The worker's sweep: ended, answered calls by when they ended, so finding the ones lacking a row
-- reads only the recent end of the index.
create index calls_answered_ended_idx on calls (ended_at) where answered_at is not null;
