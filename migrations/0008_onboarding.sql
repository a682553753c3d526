-- Onboarding: the byok tenant's provider credentials (secret encrypted by the application with
-- AES-256-GCM, bound to tenant and provider; only a masked hint in clear) and when the tenant
-- completed onboarding (null: not complete, or reset by a mode switch or a credential change).

create table provider_credentials (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  -- Ids come from the application's catalogue (llm, telco_a, telco_b, tts, stt, …).
  provider text not null check (provider ~ '^[a-z][a-z0-9_]{1,31}$'),
  primary_id text check (length(primary_id) between 1 and 200),
  -- Versioned envelope: "v1:" + base64(nonce ‖ ciphertext ‖ tag).
  secret_enc text not null check (secret_enc ~ '^v[0-9]+:'),
  extra jsonb not null default '{}' check (jsonb_typeof(extra) = 'object'),
  hint text not null check (length(hint) <= 16),
  status text not null default 'unvalidated' check (status in ('validated', 'failed', 'unvalidated')),
  -- How the last validation was made: the provider's account endpoint, or the format only (simulators).
  validation_method text check (validation_method in ('live', 'format')),
  validation_error text check (length(validation_error) <= 500),
  validated_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, provider),
  check ((status = 'validated') = (validated_at is not null))
);

alter table tenants add column onboarding_completed_at timestamptz;
