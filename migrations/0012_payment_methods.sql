-- Saved payment methods for autocharge (a card kept at a gw_card checkout, a UPI recurring token
-- from a gw_upi checkout, or a stub method), the top-ups that asked to save one, the method an
-- autocharge intent charges, and the wallet's count of consecutive failed autocharges.

create table payment_methods (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  gateway text not null check (gateway in ('gw_card', 'gw_upi', 'stub')),
  -- The gateway's customer and the method on it (PaymentMethod id, recurring token id).
  customer_id text not null,
  method_id text not null,
  -- What the owner sees: "visa •••• 4242", "ab•••@okbank".
  display_hint text not null default '',
  status text not null default 'active' check (status in ('active', 'removed')),
  created_at timestamptz not null default now(),
  removed_at timestamptz,
  unique (tenant_id, gateway, method_id)
);
create index payment_methods_active_idx on payment_methods (tenant_id, id desc) where status = 'active';

alter table payment_intents
  add column save_method boolean not null default false,
  add column payment_method_id bigint references payment_methods (id);
-- At most one autocharge in flight per workspace is checked under the wallet lock; this finds it.
create index payment_intents_pending_autocharge_idx on payment_intents (tenant_id) where purpose = 'autocharge' and status = 'pending';

alter table wallets
  add column autocharge_failures integer not null default 0 check (autocharge_failures >= 0);
