// SQL for synthesised opening-line previews (migrations/0004, 0014 and 0016, table speech_clips).
// Clips are public, immutable and addressed by a content hash, so rows carry no tenant_id; one
// spoken in a cloned voice names it, and goes when the voice does.
import { Effect } from "effect"
import { type Db, query } from "../platform/Db.js"

export interface ClipMeta {
  readonly id: string
  readonly persona: string
  readonly duration_ms: number
}

/** What a repeated preview request needs: the answer, and whether the row wants a touch. */
export interface ClipUse extends ClipMeta {
  readonly last_used_at: Date
  /** Only anonymous callers have asked for it (it counts against the anonymous cap). */
  readonly anonymous: boolean
}

export interface StoredClip extends ClipMeta {
  readonly audio: Buffer
  readonly last_used_at: Date
}

export interface NewClip extends ClipMeta {
  readonly provider: string
  readonly text_sha256: Buffer
  readonly audio: Buffer
  readonly anonymous: boolean
  /** The cloned voice that speaks it; null for a catalogue persona's voice. */
  readonly voice_avatar_id: number | null
}

/** The clip without its audio: enough to answer a repeated preview request. */
export const findClipMeta = (id: string): Effect.Effect<ClipUse | undefined, never, Db> =>
  query(async (sql) => {
    const [row] = await sql<
      ClipUse[]
    >`select id, persona, duration_ms, last_used_at, anonymous from speech_clips where id = ${id}`
    return row
  })

export const findClip = (id: string): Effect.Effect<StoredClip | undefined, never, Db> =>
  query(async (sql) => {
    const [row] = await sql<StoredClip[]>`
      select id, persona, duration_ms, audio, last_used_at from speech_clips where id = ${id}`
    return row
  })

/**
 * Stores a clip unless another request (in any process) stored the same one first; a signed-in
 * caller's insert still takes an anonymous row out of the anonymous class.
 */
export const insertClip = (clip: NewClip): Effect.Effect<void, never, Db> =>
  query(
    (sql) => sql`
      insert into speech_clips (id, provider, persona, text_sha256, audio, duration_ms, anonymous, voice_avatar_id)
      values (${clip.id}, ${clip.provider}, ${clip.persona}, ${clip.text_sha256}, ${clip.audio}, ${clip.duration_ms},
        ${clip.anonymous}, ${clip.voice_avatar_id})
      on conflict (id) do update set anonymous = false, last_used_at = now()
        where speech_clips.anonymous and not excluded.anonymous`,
  ).pipe(Effect.asVoid)

/**
 * Marks a clip used; skipped by the row itself when it was marked within `staleAfterSeconds`,
 * unless a signed-in workspace (`byWorkspace`) is the first to use an anonymous clip.
 */
export const touchClip = (id: string, staleAfterSeconds: number, byWorkspace = false): Effect.Effect<void, never, Db> =>
  query(
    (sql) => sql`
      update speech_clips set last_used_at = now(), anonymous = anonymous and not ${byWorkspace}
      where id = ${id}
        and (last_used_at < now() - make_interval(secs => ${staleAfterSeconds}) or (anonymous and ${byWorkspace}))`,
  ).pipe(Effect.asVoid)

/** Deletes up to `limit` clips last used before `before`, oldest first; returns how many. */
export const deleteUnusedSince = (before: Date, limit: number): Effect.Effect<number, never, Db> =>
  query(async (sql) => {
    const r = await sql`
      delete from speech_clips where id in (
        select id from speech_clips where last_used_at < ${before}
        order by last_used_at limit ${limit} for update skip locked)`
    return r.count
  })

/**
 * Deletes up to `limit` clips beyond the `keep` most recently used (of the anonymous ones only,
 * when `anonymousOnly`), least recently used first; returns how many.
 */
export const deleteBeyond = (keep: number, anonymousOnly: boolean, limit: number): Effect.Effect<number, never, Db> =>
  query(async (sql) => {
    const r = await sql`
      delete from speech_clips where id in (
        select id from speech_clips ${anonymousOnly ? sql`where anonymous` : sql``}
        order by last_used_at desc, id offset ${keep} limit ${limit} for update skip locked)`
    return r.count
  })

/** Deletes every clip spoken in a cloned voice (the voice was deleted). */
export const deleteVoiceClips = (voiceAvatarId: number): Effect.Effect<void, never, Db> =>
  query((sql) => sql`delete from speech_clips where voice_avatar_id = ${voiceAvatarId}`).pipe(Effect.asVoid)
