-- Media streams (issue 37): a carrier's WebSocket carrying a call's audio is let in only with a
-- token minted for that call when its stream was asked for: single-use (used_at is set by the one
-- upgrade that takes it), short-lived (expires_at), and bound to the call and its workspace. Only
-- the token's SHA-256 is kept; the token itself goes out once, in the stream URL.
create table media_stream_tokens (
  id bigserial primary key,
  tenant_id bigint not null references tenants (id) on delete cascade,
  call_id bigint not null references calls (id) on delete cascade,
  secret_hash bytea not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);

create index media_stream_tokens_call_idx on media_stream_tokens (call_id);
-- The sweep of spent and expired tokens.
create index media_stream_tokens_expires_idx on media_stream_tokens (expires_at);
