-- Personas: who the callee hears (name, language, voice, style, greeting, the agent's name),
-- written by src/personas/personas.repo.ts. A workspace's own rows carry its tenant_id; the seven
-- built-in personas (one per catalogue voice of src/voices/voices.catalog.ts, kept in step with it
-- by the service) have tenant_id null and builtin_voice set, so every persona has an integer id.

create table personas (
  id bigint generated always as identity primary key,
  -- null: a built-in persona, readable by every workspace and changed by none
  tenant_id bigint references tenants (id),
  -- a built-in's catalogue voice id ("priya"); null for a workspace's persona
  builtin_voice text unique,
  name text not null check (length(name) between 1 and 100),
  -- BCP 47, canonical form (Intl.getCanonicalLocales)
  language text not null check (length(language) between 2 and 64),
  -- what it speaks with: a catalogue voice id, or one of the workspace's cloned voices, or neither
  -- (then the workflow's own voice)
  voice text,
  voice_avatar_id bigint references voice_avatars (id),
  -- tone words, a JSON array of short strings
  style jsonb not null default '[]'::jsonb,
  -- the call's opening line; placeholders {name}, {agent_name}, {company} only
  greeting text check (length(greeting) between 1 and 500),
  -- what the agent calls itself ({agent_name}); null: the voice's catalogue name
  agent_name text check (length(agent_name) between 1 and 60),
  speaking_rate double precision check (speaking_rate between 0.5 and 2.0),
  -- every other field of the body the persona was created or edited with
  attributes jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz,
  check ((tenant_id is null) = (builtin_voice is not null)),
  check (voice is null or voice_avatar_id is null)
);
create index personas_tenant_idx on personas (tenant_id, id) where deleted_at is null;

-- The persona a workflow speaks as (PUT /api/personas/assign). Null: never assigned, so its rule
-- book's persona speaks; clearing an assignment stores the geography default (a built-in).
alter table workflows add column persona_id bigint references personas (id);
create index workflows_persona_idx on workflows (persona_id) where persona_id is not null;
