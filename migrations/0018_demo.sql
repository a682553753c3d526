-- The public demo (src/demo/demo.repo.ts writes these): the platform's demo workspace, the calls
-- strangers ask for (each its own run in that workspace, watched through a feed token) and the
-- anonymous voice clones they make (voice_avatars rows with tenant_id null, found by a token).

-- The one workspace demo calls are placed in: created on first use, billed to nobody.
create table demo_workspace (
  singleton boolean primary key default true check (singleton),
  tenant_id bigint not null unique references tenants (id),
  created_at timestamptz not null default now()
);

-- One row per POST /demo/call: the run that places it and the hash of its feed token (the token,
-- at least 128 random bits, is never stored).
create table demo_calls (
  id bigint generated always as identity primary key,
  feed_token_sha256 bytea not null unique check (length(feed_token_sha256) = 32),
  run_id bigint not null unique references runs (id),
  persona text not null,
  created_at timestamptz not null,
  expires_at timestamptz not null
);
-- The sweeper looks for demo calls that never got dialled (held by the calling window, or queued
-- with no runtime to take them).
create index demo_calls_created_idx on demo_calls (created_at);

-- A demo clone's public id is a random token; its row goes (cascading here and to its preview
-- clips) when the sweeper removes the expired voice.
create table demo_voices (
  token_sha256 bytea primary key check (length(token_sha256) = 32),
  voice_avatar_id bigint not null unique references voice_avatars (id) on delete cascade,
  created_at timestamptz not null default now()
);
