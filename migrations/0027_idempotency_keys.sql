-- Idempotent retries (Idempotency-Key on authenticated POSTs): one row per (workspace, key),
-- claimed before the handler runs so a duplicate in any api process sees it, then holding the
-- first completed response for 24 hours. Written only by src/idempotency/idempotency.repo.ts.

create table idempotency_keys (
  tenant_id bigint not null references tenants(id) on delete cascade,
  key text not null check (char_length(key) between 1 and 255),
  -- SHA-256 of method, path, query and body: a different request under the same key is refused.
  fingerprint bytea not null,
  -- Who holds a running claim; a stale claim (its process died) may be taken over.
  claim_token text not null,
  state text not null check (state in ('running', 'done')),
  claimed_at timestamptz not null default now(),
  status integer,
  content_type text,
  headers jsonb,
  body bytea,
  expires_at timestamptz not null,
  primary key (tenant_id, key)
);

create index idempotency_keys_expires_at on idempotency_keys (expires_at);
