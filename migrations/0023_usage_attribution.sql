-- Usage events reported by internal callers (one row per event id and workspace: a replay finds
-- its row and changes nothing), with how each was billed; and where each signup came from.

create table usage_events (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  event_id text not null check (length(event_id) between 1 and 200),
  kind text not null check (kind ~ '^[a-z][a-z0-9_.-]{0,63}$'),
  quantity numeric not null check (quantity >= 0),
  unit text not null check (length(unit) between 1 and 32),
  at timestamptz not null,
  attributes jsonb,
  -- charged: cost taken from the wallet (charged_minor, ledger_entry_id); unpriced: a kind with no
  -- price (recorded, never charged); unbilled: priced but not charged (billing_reason says why).
  billing_status text not null default 'unpriced' check (billing_status in ('charged', 'unpriced', 'unbilled')),
  billing_reason text check (billing_reason in ('insufficient_funds', 'unit_mismatch')),
  charged_minor bigint not null default 0 check (charged_minor >= 0),
  -- the batch's ledger entry; no foreign key, so a truncate of the append-only ledger still meets
  -- the ledger's own guard (42501) rather than a reference
  ledger_entry_id bigint,
  received_at timestamptz not null default now(),
  unique (tenant_id, event_id)
);
create index usage_events_report_idx on usage_events (tenant_id, kind, at);

-- One row per signup: the body's utm/referrer/landing values, the first-touch cookie's, and the
-- source/medium/campaign the report groups by (first touch when the cookie had any, else the body).
create table signup_attributions (
  tenant_id bigint primary key references tenants (id),
  user_id bigint not null references users (id) on delete cascade,
  utm_source text check (length(utm_source) <= 200),
  utm_medium text check (length(utm_medium) <= 200),
  utm_campaign text check (length(utm_campaign) <= 200),
  referrer text check (length(referrer) <= 2048),
  landing_path text check (length(landing_path) <= 2048),
  first_touch jsonb,
  source text not null check (length(source) between 1 and 253),
  medium text not null check (length(medium) between 1 and 200),
  campaign text not null check (length(campaign) between 1 and 200),
  created_at timestamptz not null default now()
);
create index signup_attributions_created_idx on signup_attributions (created_at);
