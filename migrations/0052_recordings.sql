-- Call recordings (issue 38): each recorded call keeps two Ogg Opus files, `mixed` (mono, for
-- listening) and `sides` (stereo: the callee left, the agent right), in the deployment's recording
-- store (RECORDING_STORE): in Postgres itself, as 256 KiB chunks in recording_chunks, or in an
-- S3-compatible bucket under object_key. A row exists only once its bytes are stored, and is kept
-- until expires_at (the workspace's retention when it was saved), a data-subject erase, or a newer
-- recording of the same call and track. src/recordings/ writes these tables.
alter table tenants add column recording_retention_days integer not null default 90
  check (recording_retention_days between 1 and 3650);

create table recordings (
  id bigserial primary key,
  tenant_id bigint not null references tenants (id) on delete cascade,
  call_id bigint not null references calls (id),
  track text not null check (track in ('mixed', 'sides')),
  store text not null check (store in ('pg', 's3')),
  -- pg: the row's own id as text (its chunks); s3: t<tenant>/c<call>/<track>-<random>.ogg, never reused.
  object_key text not null,
  content_type text not null,
  bytes bigint not null check (bytes >= 0),
  duration_ms integer not null check (duration_ms >= 0),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  unique (call_id, track)
);

-- Lookups and the erase go by call (the unique index above); a workspace's own recordings (its
-- retention changed, its export) by this one.
create index recordings_tenant_call_idx on recordings (tenant_id, call_id);
-- The retention sweep, oldest expiry first.
create index recordings_expires_idx on recordings (expires_at);

-- The Postgres store's bytes: chunk `seq` holds bytes [seq * 256 KiB, (seq + 1) * 256 KiB). An empty
-- recording has one empty chunk, so "stored, 0 bytes" and "not stored" differ.
create table recording_chunks (
  recording_id bigint not null references recordings (id) on delete cascade,
  seq integer not null check (seq >= 0),
  data bytea not null,
  primary key (recording_id, seq)
);

-- S3 objects whose rows are gone (replaced, expired, erased): written in the transaction that deletes
-- the row, and removed once the object is deleted, so an object outlives its row only until a delete
-- succeeds (retried by the sweep) and a failed delete never leaves a row pointing at nothing.
create table recording_deletions (
  id bigserial primary key,
  store text not null check (store in ('s3')),
  object_key text not null,
  created_at timestamptz not null default now(),
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  last_error text
);

create index recording_deletions_due_idx on recording_deletions (next_attempt_at);
