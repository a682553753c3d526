-- Workflows (campaigns) with their versioned rule books, runs (the rows later issues drive),
-- audiences and their staging area, the tenant do-not-call list, the national registry (NCPR),
-- the cool-down record of recent contacts, and synthesised opening-line previews.

create table workflows (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  name text not null check (length(name) between 1 and 200),
  status text not null default 'draft' check (status in ('draft', 'live', 'paused', 'retired')),
  persona text not null,
  schedule_kind text not null default 'immediate' check (schedule_kind in ('immediate', 'window', 'once')),
  -- {calling_hours: {start, end}, timezone?, days?, start_at?}: see src/workflows/workflow.schema.ts.
  schedule jsonb not null default '{}'::jsonb,
  rule_book_id bigint,
  nl_prompt text not null check (length(nl_prompt) <= 4000),
  is_test boolean not null default false,
  author_user_id text check (length(author_user_id) <= 200),
  created_by_user_id bigint references users (id),
  -- consent attestation: text, tcpa_sender_id, dpdp_consent_method, consent_attested_by_user_id, consent_attested_at.
  compliance jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  retired_at timestamptz,
  archived_at timestamptz
);
create index workflows_tenant_idx on workflows (tenant_id, id desc);

-- Every version of every workflow's rule book; a workflow's rule_book_id names its current one.
create table rule_books (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint not null references workflows (id),
  version integer not null check (version >= 1),
  body jsonb not null,
  -- generated (a language model wrote it from nl_prompt) or edited (a PUT changed fields).
  source text not null check (source in ('generated', 'edited')),
  nl_prompt text,
  model text,
  created_by_user_id bigint references users (id),
  created_at timestamptz not null default now(),
  unique (workflow_id, version)
);
alter table workflows add constraint workflows_rule_book_fk foreign key (rule_book_id) references rule_books (id);

create table runs (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint not null references workflows (id),
  status text not null default 'running' check (status in ('running', 'paused', 'completed', 'cancelled', 'failed')),
  rule_book_id bigint references rule_books (id),
  targets_total integer not null default 0,
  targets_dialed integer not null default 0,
  targets_connected integer not null default 0,
  approvals_pending integer not null default 0,
  concessions_decided integer not null default 0,
  started_at timestamptz not null default now(),
  ended_at timestamptz
);
create index runs_workflow_idx on runs (workflow_id, id desc);
-- At most one run of a workflow is running at a time.
create unique index runs_one_running_idx on runs (workflow_id) where status = 'running';

-- A workflow's audience: one row per callee, de-duplicated by number within the workflow.
create table audience_targets (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint not null references workflows (id),
  phone_e164 text not null check (phone_e164 ~ '^\+[1-9][0-9]{6,14}$'),
  name text check (length(name) <= 200),
  -- every other column of the uploaded row, by its header name.
  fields jsonb not null default '{}'::jsonb,
  upload_id bigint,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workflow_id, phone_e164)
);
create index audience_targets_tenant_phone_idx on audience_targets (tenant_id, phone_e164);

-- One attach request and its counts.
create table audience_uploads (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  workflow_id bigint not null references workflows (id),
  format text not null check (format in ('csv', 'json')),
  status text not null default 'receiving' check (status in ('receiving', 'applied', 'failed')),
  counts jsonb,
  created_by_user_id bigint references users (id),
  created_at timestamptz not null default now(),
  finished_at timestamptz
);
-- Uploads of a process that died mid-upload are found by this and swept (audience.service).
create index audience_uploads_receiving_idx on audience_uploads (created_at) where status = 'receiving';

-- Valid, normalised rows of an upload in progress, merged into audience_targets in one statement
-- once the whole file has arrived; an upload that fails leaves only these rows, which are deleted.
create unlogged table audience_staging (
  upload_id bigint not null,
  line_no integer not null,
  phone_e164 text not null,
  name text,
  fields jsonb not null default '{}'::jsonb,
  primary key (upload_id, line_no)
);

create table dnc_entries (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  phone_e164 text not null check (phone_e164 ~ '^\+[1-9][0-9]{6,14}$'),
  reason text check (length(reason) <= 200),
  -- manual (POST /dnc/add), import (POST /dnc/import), call (the callee asked), unsubscribe, erasure.
  source text not null default 'manual' check (source in ('manual', 'import', 'call', 'unsubscribe', 'erasure')),
  added_at timestamptz not null default now(),
  unique (tenant_id, phone_e164)
);
create index dnc_entries_list_idx on dnc_entries (tenant_id, added_at desc, id desc);

-- India's National Customer Preference Register: numbers whose owners refuse commercial calls.
-- preference '0' blocks every category; otherwise the categories (1–8) the owner still accepts.
create table ncpr_registry (
  phone_e164 text primary key check (phone_e164 like '+91%'),
  preference text not null default '0',
  registered_at timestamptz,
  imported_at timestamptz not null default now()
);

-- When this tenant last reached each number; the 7-day cool-down reads it, the dialer writes it.
create table recent_contacts (
  tenant_id bigint not null references tenants (id),
  phone_e164 text not null,
  last_contacted_at timestamptz not null,
  primary key (tenant_id, phone_e164)
);

-- Synthesised opening-line previews, shared by every api process, addressed by a content hash.
create table speech_clips (
  id text primary key,
  provider text not null,
  persona text not null,
  text_sha256 bytea not null,
  audio bytea not null,
  duration_ms integer not null,
  created_at timestamptz not null default now(),
  last_used_at timestamptz not null default now()
);
