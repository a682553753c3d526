-- Email: outreach messages and their delivery states, per-address per-channel preferences,
-- suppressions (workspace or global), soft-bounce counts, and provider webhook events (dedup).
-- Written by src/email/email.repo.ts.

create table email_messages (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  to_email text not null,
  channel text not null,
  -- outreach | transactional
  category text not null check (category in ('outreach', 'transactional')),
  template text,
  subject text not null,
  state text not null check (state in ('queued', 'sent', 'delivered', 'bounced', 'complained', 'failed')),
  provider text,
  provider_message_id text,
  error text,
  opened_at timestamptz,
  clicked_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index email_messages_tenant_to_idx on email_messages (tenant_id, to_email, id desc);
create unique index email_messages_provider_id_idx on email_messages (provider_message_id)
  where provider_message_id is not null;

-- What happened to a message or an address, in order: the message.* timeline source.
create table email_events (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  to_email text not null,
  message_id bigint references email_messages (id),
  -- sent, delivered, opened, clicked, bounced, soft_bounced, complained, unsubscribed,
  -- resubscribed, failed, blocked (not sent: suppressed), replied
  kind text not null,
  channel text,
  detail text,
  at timestamptz not null default now()
);
create index email_events_tenant_to_idx on email_events (tenant_id, to_email, at desc, id desc);

-- One row per (workspace, address, channel) that someone changed; absent = subscribed.
create table email_preferences (
  tenant_id bigint not null references tenants (id),
  email text not null,
  channel text not null,
  subscribed boolean not null,
  updated_at timestamptz not null default now(),
  primary key (tenant_id, email, channel)
);

-- An address no outreach mail goes to. tenant_id 0 = every workspace (hard bounces, complaints).
create table email_suppressions (
  tenant_id bigint not null,
  email text not null,
  reason text not null check (reason in ('hard_bounce', 'complaint', 'unsubscribe', 'soft_bounce')),
  source text not null,
  created_at timestamptz not null default now(),
  primary key (tenant_id, email)
);

create table email_soft_bounces (
  email text primary key,
  count integer not null,
  last_at timestamptz not null default now()
);

-- Each provider event once: dedup_key is the provider's event id, else message id + event + ts.
create table email_webhook_events (
  provider text not null,
  dedup_key text not null,
  event text not null,
  email text,
  provider_message_id text,
  -- false when the message id is not one we sent (acknowledged and recorded all the same)
  known boolean not null,
  payload jsonb not null,
  received_at timestamptz not null default now(),
  primary key (provider, dedup_key)
);
