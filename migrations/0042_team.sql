-- A workspace is run by a team (issue 33): roles owner, admin, supervisor, analyst (the old
-- 'member' becomes 'supervisor'); one owner per workspace; invitations by emailed single-use
-- link; and an append-only audit log of member, key, money-setting and role-gated changes.

alter table users drop constraint users_role_check;
update users set role = 'supervisor' where role = 'member';
alter table users add constraint users_role_check check (role in ('owner', 'admin', 'supervisor', 'analyst'));
alter table users alter column role set default 'analyst';
-- The owner pays and is the last word: exactly one per workspace (a transfer demotes first).
create unique index users_one_owner on users (tenant_id) where role = 'owner';

-- An invitation to join a workspace: the link's token is stored only as its sha256; it is used
-- once, within 7 days, unless revoked. At most one pending invitation per address and workspace.
create table invitations (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  email text not null check (email = lower(email) and length(email) between 3 and 254),
  role text not null check (role in ('admin', 'supervisor', 'analyst')),
  token_sha256 bytea not null unique,
  invited_by_user_id bigint references users (id),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  accepted_user_id bigint references users (id),
  revoked_at timestamptz
);
create unique index invitations_pending_email on invitations (tenant_id, email)
  where accepted_at is null and revoked_at is null;
create index invitations_tenant_idx on invitations (tenant_id, id desc);

-- Who changed what, when, from where, with the state before and after. Append-only: an update is
-- refused unless the transaction says it is a data-subject erase pseudonymising a contact
-- (set local parley.audit_pseudonymise = 'on'); a delete or truncate is always refused.
create table audit_events (
  id bigint generated always as identity primary key,
  tenant_id bigint not null references tenants (id),
  at timestamptz not null default now(),
  -- 'user:<id>', 'key:<id>' or 'system'
  actor text not null check (actor ~ '^(user:[0-9]+|key:[0-9]+|system)$'),
  actor_email text,
  actor_role text,
  ip text,
  action text not null check (action ~ '^[a-z_]+\.[a-z_]+$'),
  target text,
  before jsonb,
  after jsonb
);
create index audit_events_tenant_idx on audit_events (tenant_id, id desc);

create function audit_events_append_only() returns trigger language plpgsql as $$
begin
  if tg_op = 'UPDATE' and coalesce(current_setting('parley.audit_pseudonymise', true), '') = 'on' then
    return new;
  end if;
  raise exception 'audit_events is append-only: % refused', tg_op using errcode = '42501';
end
$$;
create trigger audit_events_no_change before update or delete on audit_events
  for each row execute function audit_events_append_only();
create trigger audit_events_no_truncate before truncate on audit_events
  for each statement execute function audit_events_append_only();
