-- A carrier signs the upgrade of the media stream it opens (telco_a as Twilio does: the
-- X-telco_a-Signature header, base64 HMAC-SHA1 of the full stream URL keyed with the account's
-- auth token). The token minted for a carrier's stream keeps the address the carrier was given,
-- without the token itself, so the upgrade can be checked against the URL the carrier signed
-- whatever proxy it came through. The simulator's streams are not signed: null.
alter table media_stream_tokens add column signed_base text;
