-- Data-subject erase: rows kept for audit hold `erased:<hex HMAC>` where they held a phone, and the
-- contact's audience_targets row is deleted while its calls and run targets stay (usage and ledger
-- entries reference calls), so those two references to audience_targets become plain ids (as
-- turns.target_id and dial_decisions.target_id already are). Written by src/dsr/erase.repo.ts.

alter table calls drop constraint calls_target_id_fkey;
alter table run_targets drop constraint run_targets_target_id_fkey;

alter table dnc_entries drop constraint dnc_entries_phone_e164_check;
alter table dnc_entries add constraint dnc_entries_phone_e164_check
  check (phone_e164 ~ '^\+[1-9][0-9]{6,14}$' or phone_e164 ~ '^erased:[0-9a-f]{64}$');
