-- The knowledge base: rules the agent obeys (written by hand, imported, or learnt from feedback),
-- supervisors' verdicts on what the agent said, and the record of both for the timeline.
-- Written by src/kb/kb.repo.ts (rules, events) and src/kb/feedback.repo.ts (feedback and its links).

create table kb_rules (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  -- null: the whole workspace
  workflow_id bigint references workflows (id),
  bucket text not null check (bucket ~ '^[a-z0-9_.-]{1,64}$'),
  title text not null,
  -- the instruction; in the banned_phrases bucket, the line that must never be said
  body text not null,
  -- when the rule applies: {phrases: [..], category: ..}; null: always
  trigger jsonb,
  priority integer not null default 0,
  status text not null check (status in ('active', 'paused', 'archived')),
  source_kind text not null check (source_kind in ('manual', 'import', 'feedback')),
  -- the normalised line a feedback rule is about, so further verdicts find it
  learnt_line text,
  learnt_kind text check (learnt_kind in ('ban', 'punish', 'reward')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index kb_rules_tenant_idx on kb_rules (tenant_id, bucket, id);
create index kb_rules_live_idx on kb_rules (tenant_id, workflow_id) where status = 'active';
create unique index kb_rules_learnt_idx on kb_rules (tenant_id, coalesce(workflow_id, 0), learnt_kind, learnt_line)
  where learnt_line is not null and status <> 'archived';

create table kb_feedback (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  turn_id bigint not null references turns (id),
  run_id bigint not null references runs (id),
  workflow_id bigint not null references workflows (id),
  -- who gave it: 'user:<id>' or 'key:<id>'; one verdict per reviewer and turn
  reviewer text not null,
  verdict text not null check (verdict in ('reward', 'punish', 'ban')),
  note text,
  -- the agent's line with the call's placeholders put back ({name}, {agent_name}, {company})
  line text not null,
  -- the same line normalised (normaliseLine): what verdicts on "the same line" are grouped by
  line_key text not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, turn_id, reviewer)
);
create index kb_feedback_tenant_idx on kb_feedback (tenant_id, id desc);
create index kb_feedback_line_idx on kb_feedback (tenant_id, workflow_id, line_key);

-- Which feedback a learnt rule came from.
create table kb_rule_feedback (
  rule_id bigint not null references kb_rules (id),
  feedback_id bigint not null references kb_feedback (id),
  primary key (rule_id, feedback_id)
);
create index kb_rule_feedback_feedback_idx on kb_rule_feedback (feedback_id);

-- Rule changes and feedback, for the timeline.
create table kb_events (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint,
  action text not null,
  rule_id bigint,
  feedback_id bigint,
  detail jsonb not null default '{}'::jsonb,
  at timestamptz not null default now()
);
create index kb_events_tenant_idx on kb_events (tenant_id, at desc, id desc);
