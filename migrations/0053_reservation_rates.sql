-- A call's per-minute rate as reserved: the bundled rate, plus the hosted speech it is heard through
-- on the platform's accounts (src/billing/pricing.ts). Null: the bundled rate (every earlier hold).
alter table usage_reservations add column rate_per_minute_minor bigint;
alter table usage_reservations add column hosted_speech text[] not null default '{}';
