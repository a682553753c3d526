-- Phone numbers a workspace provisioned (bought through Parley) or imported (already its own on a
-- byok provider account), with the monthly rental of numbers on the platform's account.
create table phone_numbers (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  phone_e164 text not null check (phone_e164 ~ '^\+[1-9][0-9]{6,14}$'),
  country text not null check (country ~ '^[A-Z]{2,4}$'),
  source text not null check (source in ('provisioned', 'imported')),
  provider text not null check (provider in ('sim', 'telco_a')),
  -- Whose provider account holds the number: the platform's (bundled) or the workspace's own (byok).
  account text not null check (account in ('platform', 'tenant')),
  -- The account's identifier (not a secret), so a release goes to the account that holds it.
  account_ref text,
  provider_number_id text,
  -- pending: claimed while the provider is asked; active: wired to us; released: given back.
  status text not null default 'pending' check (status in ('pending', 'active', 'released')),
  monthly_cost_minor bigint not null default 0 check (monthly_cost_minor >= 0),
  currency text not null check (currency in ('INR', 'USD')),
  workflow_id bigint references workflows (id),
  capabilities jsonb not null default '{"voice": true, "sms": false}'::jsonb,
  voice_url text,
  status_url text,
  -- The rented month being paid for, and when the next charge is tried (later after a failed one).
  current_period_start timestamptz,
  current_period_end timestamptz,
  rent_due_at timestamptz,
  created_at timestamptz not null default now(),
  activated_at timestamptz,
  released_at timestamptz
);
-- A number is held (claimed or active) by one workspace at a time.
create unique index phone_numbers_one_holder on phone_numbers (phone_e164) where status in ('pending', 'active');
create index phone_numbers_tenant_idx on phone_numbers (tenant_id, id desc);
create index phone_numbers_rent_due_idx on phone_numbers (rent_due_at) where status = 'active' and monthly_cost_minor > 0;
