-- Billing: payment intents (top-ups, autocharges, subscription charges), every gateway event
-- received (the idempotency record for webhooks), autocharge settings, the byok subscription,
-- and call-cost reservations.

alter table wallets
  add column autocharge_enabled boolean not null default false,
  add column autocharge_threshold_minor bigint check (autocharge_threshold_minor > 0),
  add column autocharge_amount_minor bigint check (autocharge_amount_minor between 1 and 10000000),
  add constraint wallets_autocharge_complete check (
    not autocharge_enabled or (autocharge_threshold_minor is not null and autocharge_amount_minor is not null));

create table payment_intents (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  gateway text not null check (gateway in ('gw_card', 'gw_upi', 'stub')),
  external_id text not null,
  amount_minor bigint not null check (amount_minor between 1 and 10000000),
  currency text not null check (currency in ('INR', 'USD')),
  purpose text not null default 'topup' check (purpose in ('topup', 'autocharge')),
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  checkout_url text,
  return_url text,
  created_at timestamptz not null default now(),
  settled_at timestamptz,
  unique (gateway, external_id)
);
create index payment_intents_tenant_idx on payment_intents (tenant_id, id desc);

-- One row per gateway event id: a second delivery of the same event finds its row and does nothing.
create table payment_events (
  id bigint generated always as identity primary key,
  source text not null check (source in ('gw_card', 'gw_upi', 'stub', 'payment')),
  event_id text not null,
  type text not null,
  intent_id bigint references payment_intents (id),
  outcome text not null default 'received',
  payload jsonb not null,
  received_at timestamptz not null default now(),
  unique (source, event_id)
);

create table subscriptions (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  plan text not null default 'byok' check (plan = 'byok'),
  status text not null check (status in ('pending_authorisation', 'active', 'cancelled')),
  amount_minor bigint not null check (amount_minor > 0),
  currency text not null check (currency in ('INR', 'USD')),
  external_id text not null unique,
  short_url text not null,
  current_period_start timestamptz,
  current_period_end timestamptz,
  created_at timestamptz not null default now(),
  cancelled_at timestamptz
);
-- At most one subscription that is not cancelled per workspace.
create unique index subscriptions_one_open on subscriptions (tenant_id) where status <> 'cancelled';

create table subscription_charges (
  id bigint generated always as identity primary key,
  subscription_id bigint not null references subscriptions (id),
  period_start timestamptz not null,
  period_end timestamptz not null,
  amount_minor bigint not null,
  charged_at timestamptz not null default now(),
  unique (subscription_id, period_start)
);

-- The expected cost of a call, held before dialing and settled at hangup.
create table usage_reservations (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  call_ref text not null unique,
  reserved_minor bigint not null check (reserved_minor > 0),
  settled_minor bigint check (settled_minor >= 0),
  status text not null default 'reserved' check (status in ('reserved', 'settled', 'released')),
  created_at timestamptz not null default now(),
  settled_at timestamptz
);
create index usage_reservations_open_idx on usage_reservations (tenant_id) where status = 'reserved';
