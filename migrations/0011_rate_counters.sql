-- Fixed-window counters shared by every process: per-IP and per-address budgets (signups, OTP
-- guesses, anonymous previews) that must hold across api processes and restarts.
create table rate_counters (
  key text primary key,
  hits integer not null,
  window_started_at timestamptz not null
);
