// SQL for cloned voices (migrations/0016, table voice_avatars) and their assignment to workflows,
// decided here under the rows' locks and written by workflows through the WorkflowVoices port.
// Workspace queries are scoped by tenant.
import type { Sql, Tx } from "../platform/Db.js"
import type { ClonedVoiceParams, SampleFormat } from "../providers/speech/speech.interface.js"
import type { WorkflowVoicesPort } from "./WorkflowVoices.js"

export interface AvatarRow {
  readonly id: number
  readonly tenant_id: number | null
  readonly name: string
  readonly sample_sha256: Buffer
  readonly sample_path: string
  readonly sample_bytes: number
  readonly format: SampleFormat
  readonly mime: string
  readonly duration_ms: number
  readonly provider: string
  readonly provider_voice_id: string | null
  readonly params: ClonedVoiceParams
  readonly expires_at: Date | null
  readonly created_at: Date
}

/** A workspace's voice with the workflows it is assigned to. */
export interface ListedAvatar extends AvatarRow {
  readonly workflow_ids: number[]
}

export interface NewAvatar {
  /** null: an anonymous demo clone (then expiresAt is required by the table). */
  readonly tenantId: number | null
  readonly name: string
  readonly sampleSha256: Buffer
  readonly samplePath: string
  readonly sampleBytes: number
  readonly format: SampleFormat
  readonly mime: string
  readonly durationMs: number
  readonly provider: string
  readonly providerVoiceId: string | null
  readonly params: ClonedVoiceParams
  readonly expiresAt: Date | null
}

const COLUMNS = (sql: Sql | Tx) => sql`
  id, tenant_id, name, sample_sha256, sample_path, sample_bytes, format, mime, duration_ms, provider,
  provider_voice_id, params, expires_at, created_at`

export async function insertAvatar(sql: Sql, a: NewAvatar): Promise<AvatarRow> {
  const [row] = await sql<[AvatarRow]>`
    insert into voice_avatars (tenant_id, name, sample_sha256, sample_path, sample_bytes, format, mime, duration_ms,
      provider, provider_voice_id, params, expires_at)
    values (${a.tenantId}, ${a.name}, ${a.sampleSha256}, ${a.samplePath}, ${a.sampleBytes}, ${a.format}, ${a.mime},
      ${a.durationMs}, ${a.provider}, ${a.providerVoiceId}, ${sql.json(a.params as never)}, ${a.expiresAt})
    returning ${COLUMNS(sql)}`
  return row
}

/** The workspace's voices, newest first, each with the workflows it is assigned to. */
export async function listAvatars(sql: Sql, tenantId: number): Promise<ListedAvatar[]> {
  const rows = await sql<ListedAvatar[]>`
    select ${COLUMNS(sql)},
      coalesce((select array_agg(w.id order by w.id) from workflows w
        where w.voice_avatar_id = v.id and w.tenant_id = ${tenantId}), '{}') as workflow_ids
    from voice_avatars v
    where v.tenant_id = ${tenantId} and v.deleted_at is null
    order by v.id desc`
  return rows.map((r) => ({ ...r, workflow_ids: r.workflow_ids.map(Number) }))
}

/** A live (not deleted) voice: the workspace's, or with tenantId null a demo clone. */
export async function findAvatar(sql: Sql | Tx, tenantId: number | null, id: number): Promise<AvatarRow | undefined> {
  const [row] = await sql<AvatarRow[]>`
    select ${COLUMNS(sql)} from voice_avatars
    where id = ${id} and tenant_id is not distinct from ${tenantId} and deleted_at is null`
  return row
}

export type DeleteOutcome =
  | { readonly kind: "not_found" }
  | { readonly kind: "live"; readonly workflowIds: number[] }
  | { readonly kind: "deleted"; readonly row: AvatarRow; readonly sampleInUse: boolean }

/**
 * Marks a workspace's voice deleted and clears it from the workflows it was assigned to, unless one
 * of them is live. The voice's row is locked first, then its workflows': an assignment in flight
 * (which holds the voice row shared) lands before the check, and a workflow going live (which
 * locks its own row) either is seen live or finds the voice gone.
 */
export async function deleteAvatar(
  sql: Sql,
  tenantId: number,
  id: number,
  workflows: WorkflowVoicesPort,
): Promise<DeleteOutcome> {
  return sql.begin(async (tx): Promise<DeleteOutcome> => {
    const [row] = await tx<AvatarRow[]>`
      select ${COLUMNS(tx)} from voice_avatars
      where id = ${id} and tenant_id = ${tenantId} and deleted_at is null
      for update`
    if (row === undefined) return { kind: "not_found" }
    const users = await tx<{ id: number; status: string }[]>`
      select id, status from workflows where voice_avatar_id = ${id} order by id for no key update`
    const live = users.filter((w) => w.status === "live").map((w) => w.id)
    if (live.length > 0) return { kind: "live", workflowIds: live }
    if (users.length > 0) await workflows.unassignEverywhere(tx, id)
    await tx`update voice_avatars set deleted_at = now() where id = ${id}`
    return { kind: "deleted", row, sampleInUse: await sampleInUse(tx, row.sample_sha256) }
  })
}

/**
 * Deletes up to `limit` anonymous demo clones that expired by `now` (their preview clips and demo
 * tokens go with them, by cascade); returns the deleted rows, whose samples may now be unused.
 */
export async function deleteExpiredDemoAvatars(sql: Sql, now: Date, limit: number): Promise<AvatarRow[]> {
  return sql<AvatarRow[]>`
    delete from voice_avatars where id in (
      select id from voice_avatars where tenant_id is null and expires_at <= ${now}
      order by expires_at limit ${limit} for update skip locked)
    returning ${COLUMNS(sql)}`
}

/** Whether a live (not deleted) voice was made from the sample with this hash. */
export async function sampleInUse(sql: Sql | Tx, sha256: Buffer): Promise<boolean> {
  const [row] = await sql`
    select 1 from voice_avatars where sample_sha256 = ${sha256} and deleted_at is null limit 1`
  return row !== undefined
}

export type AssignOutcome =
  | { readonly kind: "assigned" }
  | { readonly kind: "no_workflow" }
  | { readonly kind: "no_voice" }
  | { readonly kind: "refused"; readonly status: "live" | "retired" }

/**
 * Sets (or, with voiceId null, clears) the workflow's cloned voice under the workflow's row lock;
 * the voice row is held shared so it cannot be deleted before this commits.
 */
export async function assignAvatar(
  sql: Sql,
  tenantId: number,
  workflowId: number,
  voiceId: number | null,
  workflows: WorkflowVoicesPort,
): Promise<AssignOutcome> {
  return sql.begin(async (tx): Promise<AssignOutcome> => {
    const [w] = await tx<{ status: string; archived: boolean }[]>`
      select status, archived_at is not null as archived from workflows
      where id = ${workflowId} and tenant_id = ${tenantId}
      for update`
    if (w === undefined) return { kind: "no_workflow" }
    if (w.status === "live") return { kind: "refused", status: "live" }
    if (w.status === "retired" || w.archived) return { kind: "refused", status: "retired" }
    if (voiceId !== null) {
      const [v] = await tx`
        select id from voice_avatars where id = ${voiceId} and tenant_id = ${tenantId} and deleted_at is null
        for share`
      if (v === undefined) return { kind: "no_voice" }
    }
    await workflows.assign(tx, workflowId, voiceId)
    return { kind: "assigned" }
  })
}

/** What a workflow speaks with: its persona and its cloned voice (null when none is assigned). */
export async function workflowVoice(
  sql: Sql,
  tenantId: number,
  workflowId: number,
): Promise<{ persona: string; avatar: AvatarRow | null } | undefined> {
  // The workflow's own cloned voice first, then its assigned persona's voice (migrations/0017).
  const [w] = await sql<{ persona: string; voice_avatar_id: number | null }[]>`
    select coalesce(p.voice, w.persona) as persona, coalesce(w.voice_avatar_id, p.voice_avatar_id) as voice_avatar_id
    from workflows w left join personas p on p.id = w.persona_id and p.deleted_at is null
    where w.id = ${workflowId} and w.tenant_id = ${tenantId}`
  if (w === undefined) return undefined
  if (w.voice_avatar_id === null) return { persona: w.persona, avatar: null }
  // A persona's cloned voice may have been deleted since: then the catalogue voice speaks.
  return { persona: w.persona, avatar: (await findAvatar(sql, tenantId, w.voice_avatar_id)) ?? null }
}
