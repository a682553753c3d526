-- Data-subject rights: an erased contact stays suppressed by a keyed hash (HMAC-SHA256 with a
-- per-workspace key derived from the deployment's key), and every export and erase is on record
-- with the hash, the actor and the time, never the identifier. Written by src/dsr/dsr.repo.ts.

create table erased_contacts (
  tenant_id bigint not null references tenants (id),
  -- hex HMAC of the normalised identifier (E.164 phone or lower-cased email)
  contact_hash text not null,
  kind text not null check (kind in ('phone', 'email')),
  erased_at timestamptz not null default now(),
  primary key (tenant_id, contact_hash)
);

create table dsr_requests (
  id bigint generated always as identity primary key,
  -- the receipt a caller keeps
  receipt_id text not null unique,
  tenant_id bigint not null references tenants (id),
  action text not null check (action in ('export', 'erase')),
  contact_hash text not null,
  actor text not null,
  -- erase: {table: count}
  detail jsonb not null default '{}'::jsonb,
  at timestamptz not null default now()
);
create index dsr_requests_tenant_idx on dsr_requests (tenant_id, id desc);
