-- Preview clips are evicted when unused for PREVIEW_CLIP_TTL_DAYS and past count caps, least
-- recently used first (src/previews/previews.sweeper.ts); clips only anonymous callers asked for
-- are marked, so a public flood can evict only its own kind.
alter table speech_clips add column anonymous boolean not null default false;

create index speech_clips_lru on speech_clips (last_used_at);
create index speech_clips_anonymous_lru on speech_clips (last_used_at) where anonymous;
