-- Identity and access: tenants (workspaces), users, email verification, revoked session tokens,
-- API keys with their audit trail, OTP codes, login throttling, spent ALTCHA challenges, the
-- deployment's generated secrets, and the wallet/ledger core that signup's trial credit uses.

create table tenants (
  id bigint generated always as identity primary key,
  name text not null check (length(name) between 1 and 200),
  status text not null default 'active' check (status in ('active', 'suspended', 'closed')),
  plan_tier text not null default 'free' check (plan_tier in ('free', 'all_inclusive', 'byok')),
  country text not null check (country in ('IN', 'US', 'GB', 'AU', 'CA', 'SG', 'AE')),
  currency text not null check (currency in ('INR', 'USD')),
  onboarding_mode text not null default 'bundled' check (onboarding_mode in ('bundled', 'byok')),
  trial_expires_at timestamptz,
  created_at timestamptz not null default now()
);

create table users (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  email text not null check (email = lower(email) and length(email) between 3 and 254),
  full_name text check (length(full_name) <= 200),
  role text not null default 'owner' check (role in ('owner', 'admin', 'member')),
  -- null for accounts that sign in only through an identity provider (login answers 400).
  password_hash text,
  auth_provider text not null default 'password' check (auth_provider in ('password', 'oauth')),
  status text not null default 'active' check (status in ('active', 'inactive')),
  email_verified boolean not null default false,
  email_verified_at timestamptz,
  created_at timestamptz not null default now()
);
create unique index users_email_key on users (email);
create index users_tenant_idx on users (tenant_id);

create table email_verifications (
  token_sha256 bytea primary key,
  user_id bigint not null references users (id) on delete cascade,
  expires_at timestamptz not null,
  used_at timestamptz,
  created_at timestamptz not null default now()
);

-- A logged-out JWT's id, kept until the token would have expired anyway.
create table revoked_tokens (
  jti text primary key,
  user_id bigint not null references users (id) on delete cascade,
  expires_at timestamptz not null,
  revoked_at timestamptz not null default now()
);
create index revoked_tokens_expiry_idx on revoked_tokens (expires_at);

create table api_keys (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  name text not null check (length(name) between 1 and 120),
  prefix text not null,
  secret_sha256 bytea not null unique,
  scope text not null check (scope in ('read', 'write', 'admin')),
  created_at timestamptz not null default now(),
  created_by_user_id bigint references users (id),
  expires_at timestamptz,
  last_used_at timestamptz,
  last_used_ip text,
  revoked_at timestamptz,
  revoked_reason text check (length(revoked_reason) <= 80),
  revoked_by_user_id bigint references users (id)
);
create index api_keys_tenant_idx on api_keys (tenant_id);

-- Who created, revoked or deleted each key, when and from where. key_id is not a foreign key:
-- the trail outlives a deleted key.
create table api_key_events (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  key_id bigint not null,
  action text not null check (action in ('created', 'revoked', 'deleted')),
  actor_user_id bigint references users (id),
  ip text,
  user_agent text,
  at timestamptz not null default now()
);
create index api_key_events_key_idx on api_key_events (tenant_id, key_id);

-- One live code per address. Rows exist for unknown addresses too, so start and resend behave
-- (and rate-limit) the same whether or not an account exists.
create table otp_codes (
  email text primary key check (email = lower(email)),
  code_sha256 bytea,
  expires_at timestamptz,
  attempts integer not null default 0,
  last_sent_at timestamptz not null
);

-- Failed logins per account and per client address, for slowing down and then refusing guesses.
create table login_failures (
  key text primary key,
  failures integer not null,
  window_started_at timestamptz not null,
  locked_until timestamptz
);

create table altcha_spent (
  signature text primary key,
  expires_at timestamptz not null
);
create index altcha_spent_expiry_idx on altcha_spent (expires_at);

-- Secrets the deployment generates for itself when none is configured (JWT key, ALTCHA key),
-- shared by every process through the database.
create table system_secrets (
  name text primary key,
  value text not null,
  created_at timestamptz not null default now()
);

-- The wallet and its append-only ledger: a balance change and its entry commit together.
create table wallets (
  tenant_id bigint primary key references tenants (id),
  currency text not null check (currency in ('INR', 'USD')),
  balance_minor bigint not null default 0 check (balance_minor >= 0),
  updated_at timestamptz not null default now()
);

create table ledger_entries (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  currency text not null check (currency in ('INR', 'USD')),
  amount_minor bigint not null check (amount_minor <> 0),
  kind text not null check (kind ~ '^[a-z_]+$'),
  reference text,
  balance_after_minor bigint not null check (balance_after_minor >= 0),
  idempotency_key text not null unique,
  created_at timestamptz not null default now()
);
create index ledger_entries_tenant_idx on ledger_entries (tenant_id, id desc);

-- Append-only, loudly: a change to a written entry is an error (42501), not a silent no-op.
create function ledger_entries_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'ledger_entries is append-only: % refused', tg_op using errcode = '42501';
end
$$;
create trigger ledger_entries_no_change before update or delete on ledger_entries
  for each row execute function ledger_entries_append_only();
create trigger ledger_entries_no_truncate before truncate on ledger_entries
  for each statement execute function ledger_entries_append_only();

-- One ledger post in one round trip: lock the wallet, return an earlier entry with the same key,
-- refuse an overdraft or a balance past exact JSON integers, else move the balance and append.
-- Each statement sees rows committed while it waited for the lock (READ COMMITTED), which is what
-- makes a replay that raced the first post find it.
create function ledger_post(p_tenant bigint, p_amount bigint, p_kind text, p_reference text, p_key text)
returns jsonb language plpgsql as $$
declare
  w wallets%rowtype;
  e ledger_entries%rowtype;
  next_balance bigint;
begin
  select * into w from wallets where tenant_id = p_tenant for update;
  if not found then
    raise exception 'tenant % has no wallet', p_tenant using errcode = 'P0002';
  end if;
  select * into e from ledger_entries where idempotency_key = p_key;
  if found then
    if e.tenant_id <> p_tenant or e.amount_minor <> p_amount then
      raise exception 'idempotency key % was used for a different entry', p_key using errcode = 'P0001';
    end if;
    return jsonb_build_object('outcome', 'replayed', 'entry', to_jsonb(e));
  end if;
  next_balance := w.balance_minor + p_amount;
  if next_balance > 9007199254740991 then
    raise exception 'balance of tenant % would leave the exact integer range', p_tenant using errcode = '22003';
  end if;
  if next_balance < 0 then
    return jsonb_build_object('outcome', 'insufficient_funds', 'balance_minor', w.balance_minor);
  end if;
  update wallets set balance_minor = next_balance, updated_at = now() where tenant_id = p_tenant;
  insert into ledger_entries (tenant_id, currency, amount_minor, kind, reference, balance_after_minor, idempotency_key)
  values (p_tenant, w.currency, p_amount, p_kind, p_reference, next_balance, p_key)
  returning * into e;
  return jsonb_build_object('outcome', 'posted', 'entry', to_jsonb(e));
end
$$;

