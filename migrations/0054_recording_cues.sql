-- Where each turn began in a recording (ms of audio, and who spoke), in order: the console's player
-- follows the transcript by them (a speaker's k-th cue is its k-th turn).
alter table recordings add column cues jsonb not null default '[]';
