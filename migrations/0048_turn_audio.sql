-- Turns of calls heard as audio (issue 37): an agent turn the callee spoke over is stored as what
-- they heard whole, marked interrupted; an agent turn answering the callee records how long it took
-- from the end of their speech to its first audio, by stage ({total, endpointing, transcript,
-- model, synthesis, hop}, in ms). Text calls leave both as they were (false, null).
alter table turns add column interrupted boolean not null default false;
alter table turns add column latency_ms jsonb;
