-- telco_a callbacks (status or voice) correctly signed for a workspace named in the URL
-- (?tenant_id=<id>) but about a call Parley does not know: acknowledged, and kept here rather than
-- refused. Only what identifies the callback is kept (no caller or callee numbers). Written by
-- src/calls/inbound-calls.repo.ts.
create table telco_unmatched_callbacks (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  provider text not null,
  kind text not null check (kind in ('status', 'voice')),
  method text not null check (method in ('GET', 'POST')),
  provider_call_id text,
  call_status text,
  duration_seconds integer,
  received_at timestamptz not null default now()
);
create index telco_unmatched_callbacks_tenant_idx on telco_unmatched_callbacks (tenant_id, received_at desc);
