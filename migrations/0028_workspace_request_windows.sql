-- The workspace request rate limit (RATE_LIMIT_RPS): one row per workspace holding the current
-- one-second window (by the database's clock) and how much of its budget the api processes have
-- leased. Unlogged: a crash forgets at most one second of counting.
create unlogged table workspace_request_windows (
  tenant_id bigint primary key,
  window_start timestamptz not null,
  used integer not null,
  granted integer not null
);
