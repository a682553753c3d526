-- A hang-up the carrier did not take (issue 35): the call's row keeps it, with the carrier's id of
-- the call, and the runtime's sweep (runtime/hangups.ts) tries again until the carrier takes it or
-- it gives up. Nothing here changes how a call ends: its status and outcome are written as before.
alter table calls
  -- pending: the sweep tries again at hangup_retry_at; swept: a later hang-up went through;
  -- abandoned: the sweep gave up (the carrier's call may have stayed up). Null: no hang-up failed.
  add column hangup_state text check (hangup_state in ('pending', 'swept', 'abandoned')),
  -- When the first hang-up failed, how many tries have failed, and the last failure's code
  -- (http_500, unreachable, …; never the carrier's words, which may quote a request).
  add column hangup_failed_at timestamptz,
  add column hangup_failures integer not null default 0,
  add column hangup_error text check (length(hangup_error) <= 100),
  add column hangup_retry_at timestamptz;

create index calls_hangup_pending_idx on calls (hangup_retry_at) where hangup_state = 'pending';
