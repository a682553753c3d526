-- Turns sent by external orchestrators (POST /internal/turns) are idempotent on their outcome id
-- and per-call index.
create unique index turns_outcome_idx on turns (tenant_id, outcome_id, turn_index) where outcome_id is not null;
