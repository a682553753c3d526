// SQL for synthesised opening-line previews (migrations/0004, table speech_clips). Clips are
// public, immutable and addressed by a content hash, so rows carry no tenant_id.
import { Effect } from "effect"
import { query, type Db } from "../services/Db.js"

export interface ClipMeta {
  readonly id: string
  readonly persona: string
  readonly duration_ms: number
}

export interface StoredClip extends ClipMeta {
  readonly audio: Buffer
  readonly last_used_at: Date
}

export interface NewClip extends ClipMeta {
  readonly provider: string
  readonly text_sha256: Buffer
  readonly audio: Buffer
}

/** The clip without its audio: enough to answer a repeated preview request. */
export const findClipMeta = (id: string): Effect.Effect<ClipMeta | undefined, never, Db> =>
  query(async (sql) => {
    const [row] = await sql<ClipMeta[]>`select id, persona, duration_ms from speech_clips where id = ${id}`
    return row
  })

export const findClip = (id: string): Effect.Effect<StoredClip | undefined, never, Db> =>
  query(async (sql) => {
    const [row] = await sql<StoredClip[]>`
      select id, persona, duration_ms, audio, last_used_at from speech_clips where id = ${id}`
    return row
  })

/** Stores a clip unless another request (in any process) stored the same one first. */
export const insertClip = (clip: NewClip): Effect.Effect<void, never, Db> =>
  query(
    (sql) => sql`
      insert into speech_clips (id, provider, persona, text_sha256, audio, duration_ms)
      values (${clip.id}, ${clip.provider}, ${clip.persona}, ${clip.text_sha256}, ${clip.audio}, ${clip.duration_ms})
      on conflict (id) do nothing`,
  ).pipe(Effect.asVoid)

/** Marks a clip used; skipped by the row itself when it was marked within `staleAfterSeconds`. */
export const touchClip = (id: string, staleAfterSeconds: number): Effect.Effect<void, never, Db> =>
  query(
    (sql) => sql`
      update speech_clips set last_used_at = now()
      where id = ${id} and last_used_at < now() - make_interval(secs => ${staleAfterSeconds})`,
  ).pipe(Effect.asVoid)
