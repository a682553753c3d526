-- Calls that reach a provisioned number, answered by its workflow's persona; and the indexes the
-- contact timeline and the weekly report read by.
create table inbound_calls (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  number_id bigint not null,
  workflow_id bigint references workflows (id),
  provider text not null,
  provider_call_id text not null,
  from_e164 text not null,
  to_e164 text not null,
  status text not null default 'answered',
  duration_seconds integer,
  greeting text,
  started_at timestamptz not null default now(),
  ended_at timestamptz,
  unique (provider, provider_call_id)
);
create index inbound_calls_tenant_from_idx on inbound_calls (tenant_id, from_e164, started_at desc);

create index calls_tenant_phone_idx on calls (tenant_id, phone_e164, started_at desc);
create index calls_tenant_started_idx on calls (tenant_id, started_at);
create index approvals_tenant_phone_idx on approvals (tenant_id, target_phone);
create index dial_decisions_target_idx on dial_decisions (target_id);
