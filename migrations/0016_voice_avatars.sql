-- Cloned voices (voice avatars): voices the speech provider made from an uploaded sample, written
-- by src/voices/avatars.repo.ts. The sample itself is a file under DATA_DIR named by its content
-- hash (voice-samples/<sha256>.<format>), shared by every row that uploaded the same bytes.

create table voice_avatars (
  id bigint generated always as identity primary key,
  -- null: an anonymous demo clone, owned by no workspace, which must expire
  tenant_id bigint references tenants (id),
  name text not null check (length(name) between 1 and 100),
  sample_sha256 bytea not null check (length(sample_sha256) = 32),
  -- relative to DATA_DIR
  sample_path text not null,
  sample_bytes bigint not null check (sample_bytes > 0),
  format text not null check (format in ('wav', 'mp3', 'ogg', 'webm')),
  mime text not null,
  duration_ms integer not null check (duration_ms > 0),
  -- the speech provider that made the voice ("sim", "elevenlabs") and its id there (null: the sim's
  -- voice is its params alone)
  provider text not null,
  provider_voice_id text,
  -- {gender, pitch, speed, variant, method, pitch_hz, syllables_per_second, energy_dbfs}
  params jsonb not null,
  expires_at timestamptz,
  created_at timestamptz not null default now(),
  deleted_at timestamptz,
  check (tenant_id is not null or expires_at is not null)
);
create index voice_avatars_tenant_idx on voice_avatars (tenant_id, id desc) where deleted_at is null;
create index voice_avatars_sample_idx on voice_avatars (sample_sha256) where deleted_at is null;
create index voice_avatars_expiry_idx on voice_avatars (expires_at) where expires_at is not null;

-- The cloned voice a workflow speaks with (PUT /api/voice-avatars/assign); null: its persona's.
alter table workflows add column voice_avatar_id bigint references voice_avatars (id);
create index workflows_voice_avatar_idx on workflows (voice_avatar_id) where voice_avatar_id is not null;

-- Preview clips spoken in a cloned voice go when the voice does.
alter table speech_clips add column voice_avatar_id bigint references voice_avatars (id) on delete cascade;
create index speech_clips_voice_avatar_idx on speech_clips (voice_avatar_id) where voice_avatar_id is not null;
