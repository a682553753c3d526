-- Outbound webhooks (spec section 6): a workspace's endpoints, the transactional outbox of events,
-- and the delivery queue. An event row is inserted in the same transaction as the change it
-- reports (src/webhooks/outbox.repo.ts, emitEvent), together with one delivery per enabled
-- endpoint subscribed to its type, so an event exists if and only if its change committed.
-- Runtime processes deliver: a delivery is claimed by a lease (locked_until), one process at a time.
create table webhook_endpoints (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  url text not null,
  -- subscribed event types, or {'*'} for every type
  events text[] not null,
  description text,
  enabled boolean not null default true,
  -- why it was disabled when the platform disabled it ('failing'); null when a user did
  disabled_reason text,
  -- the signing secret (whsec_…), encrypted as provider credentials are (CREDENTIALS_MASTER_KEY)
  secret_ciphertext text not null,
  -- after a rotation the old secret keeps signing beside the new one until this time
  previous_secret_ciphertext text,
  previous_secret_expires_at timestamptz,
  -- the first attempt of an unbroken run of failed attempts (null after any success): an endpoint
  -- failing every attempt for 5 days is disabled
  failing_since timestamptz,
  version integer not null default 1,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz
);
create index webhook_endpoints_tenant_idx on webhook_endpoints (tenant_id) where deleted_at is null;

create table webhook_events (
  -- evt_ + 32 hex characters; the X-SVC-Event-Id header
  id text primary key,
  tenant_id bigint not null references tenants (id),
  type text not null,
  -- the whole event body as sent: {id, type, created_at, tenant_id, data}
  body jsonb not null,
  created_at timestamptz not null default now()
);
create index webhook_events_tenant_idx on webhook_events (tenant_id, created_at desc);

create table webhook_deliveries (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  event_id text not null references webhook_events (id) on delete cascade,
  endpoint_id bigint not null references webhook_endpoints (id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
  -- attempts made so far
  attempts integer not null default 0,
  next_attempt_at timestamptz default now(),
  -- a runtime process holds the delivery while it posts
  locked_until timestamptz,
  locked_by text,
  last_status_code integer,
  last_error text,
  last_latency_ms integer,
  last_attempt_at timestamptz,
  delivered_at timestamptz,
  created_at timestamptz not null default now(),
  unique (event_id, endpoint_id)
);
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_endpoint_idx on webhook_deliveries (endpoint_id, id desc);

-- One row per attempt, for GET /api/webhooks/endpoints/{id}/deliveries.
create table webhook_attempts (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  delivery_id bigint not null references webhook_deliveries (id) on delete cascade,
  endpoint_id bigint not null,
  event_id text not null,
  attempt integer not null,
  started_at timestamptz not null,
  status_code integer,
  latency_ms integer,
  error text,
  outcome text not null check (outcome in ('delivered', 'retry', 'failed')),
  next_attempt_at timestamptz
);
create index webhook_attempts_endpoint_idx on webhook_attempts (endpoint_id, id desc);

-- Per-workspace wallet thresholds for wallet.low (null: the cost of 30 minutes at the bundled rate)
-- and the state that makes wallet.low and wallet.exhausted fire once per crossing.
create table webhook_wallet_state (
  tenant_id bigint primary key references tenants (id),
  low_threshold_minor bigint,
  -- true after wallet.low fired, until the balance is back above the threshold
  low_fired boolean not null default false,
  -- true after wallet.exhausted fired, until the balance is back above zero
  exhausted_fired boolean not null default false
);
