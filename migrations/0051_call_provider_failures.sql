-- Hosted speech vendors that failed a call heard as audio (issue 38): the call went on with the
-- offline engine, and its record says so (GET /api/calls/{id} provider_failures, the console's call
-- view). At most ten are kept per call (a call's vendors fail it once per stage).
alter table calls add column provider_failures jsonb not null default '[]'::jsonb;
