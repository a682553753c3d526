-- Data sources: customers an operator keeps elsewhere (an uploaded CSV, a URL, the connected
-- shop), stored as rows per source, with a chat agent that answers questions about them.
-- data_sources, data_source_rows, data_source_messages: written by src/data/sources.repo.ts;
-- storefront_connections, storefront_states: by src/storefront/storefront.repo.ts.

create table data_sources (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  name text not null,
  kind text not null check (kind in ('csv', 'url', 'storefront')),
  status text not null check (status in ('pending', 'fetching', 'ready', 'failed')),
  -- kind url: where to fetch from
  url text,
  row_count integer not null default 0,
  -- the column names, inferred from the rows, in first-seen order
  columns jsonb not null default '[]'::jsonb,
  last_fetched_at timestamptz,
  error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index data_sources_tenant_idx on data_sources (tenant_id, id desc);
create unique index data_sources_one_storefront_idx on data_sources (tenant_id) where kind = 'storefront';

create table data_source_rows (
  source_id bigint not null references data_sources (id) on delete cascade,
  row_no integer not null,
  data jsonb not null,
  primary key (source_id, row_no)
);

create table data_source_messages (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  source_id bigint not null references data_sources (id) on delete cascade,
  role text not null check (role in ('user', 'agent', 'system')),
  text text not null,
  -- what the answer rests on: counts, the filter used, an audience's counts
  data jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now()
);
create index data_source_messages_source_idx on data_source_messages (source_id, id);

create table storefront_connections (
  tenant_id bigint primary key references tenants (id),
  shop text not null,
  -- encrypted like provider credentials (src/onboarding/credentials.crypto.ts)
  access_token_enc text not null,
  scopes text not null,
  connected_at timestamptz not null default now()
);

create table storefront_states (
  state_sha256 bytea primary key,
  tenant_id bigint not null references tenants (id),
  shop text not null,
  expires_at timestamptz not null,
  used_at timestamptz
);
