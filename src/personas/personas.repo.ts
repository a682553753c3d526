// SQL for personas (migrations/0017, table personas) and the reads their assignment to workflows
// decides on (workflows.persona_id itself is written by src/workflows/workflows.repo.ts). Workspace
// queries are scoped by tenant; built-ins (tenant_id null) are read by every workspace and written
// only by upsertBuiltins.
import type { Sql, Tx } from "../platform/Db.js"

export interface PersonaRow {
  readonly id: number
  readonly tenant_id: number | null
  readonly builtin_voice: string | null
  readonly name: string
  readonly language: string
  readonly voice: string | null
  readonly voice_avatar_id: number | null
  readonly style: string[]
  readonly greeting: string | null
  readonly agent_name: string | null
  readonly speaking_rate: number | null
  readonly attributes: Record<string, unknown>
  readonly created_at: Date
  readonly updated_at: Date
}

/** A persona with the workspace's workflows assigned to it. */
export interface ListedPersona extends PersonaRow {
  readonly workflow_ids: number[]
}

/** The fields a workspace sets on its persona. */
export interface PersonaFields {
  readonly name: string
  readonly language: string
  readonly voice: string | null
  readonly voiceAvatarId: number | null
  readonly style: readonly string[]
  readonly greeting: string | null
  readonly agentName: string | null
  readonly speakingRate: number | null
  readonly attributes: Record<string, unknown>
}

const COLUMNS = (sql: Sql | Tx) => sql`
  p.id, p.tenant_id, p.builtin_voice, p.name, p.language, p.voice, p.voice_avatar_id, p.style, p.greeting,
  p.agent_name, p.speaking_rate, p.attributes, p.created_at, p.updated_at`

/**
 * Makes the built-in rows match the catalogue (insert the missing, rename the changed) and
 * returns their ids by catalogue voice id. Idempotent; concurrent callers are harmless.
 */
export async function upsertBuiltins(
  sql: Sql,
  voices: ReadonlyArray<{ id: string; name: string; language: string }>,
): Promise<Map<string, number>> {
  for (const v of voices) {
    await sql`
      insert into personas (tenant_id, builtin_voice, name, language, voice)
      values (null, ${v.id}, ${v.name}, ${v.language}, ${v.id})
      on conflict (builtin_voice) do update
        set name = excluded.name, language = excluded.language, voice = excluded.voice, updated_at = now()
        where (personas.name, personas.language, personas.voice)
          is distinct from (excluded.name, excluded.language, excluded.voice)`
  }
  const rows = await sql<{ id: number; builtin_voice: string }[]>`
    select id, builtin_voice from personas where builtin_voice is not null`
  return new Map(rows.map((r) => [r.builtin_voice, r.id]))
}

/** The built-ins and the workspace's live personas, each with the workspace's workflows on it. */
export async function listPersonas(sql: Sql, tenantId: number): Promise<ListedPersona[]> {
  const rows = await sql<ListedPersona[]>`
    select ${COLUMNS(sql)},
      coalesce((select array_agg(w.id order by w.id) from workflows w
        where w.persona_id = p.id and w.tenant_id = ${tenantId}), '{}') as workflow_ids
    from personas p
    where (p.tenant_id = ${tenantId} or p.tenant_id is null) and p.deleted_at is null
    order by p.tenant_id nulls first, p.id`
  return rows.map((r) => ({ ...r, workflow_ids: r.workflow_ids.map(Number) }))
}

/**
 * A live persona the workspace can use (its own or a built-in), optionally locked: `share` keeps
 * it from being edited or deleted until the transaction ends, `update` is the editor's lock.
 */
export async function findPersona(
  sql: Sql | Tx,
  tenantId: number,
  id: number,
  lock: "none" | "share" | "update" = "none",
): Promise<PersonaRow | undefined> {
  const locking = lock === "share" ? sql`for share` : lock === "update" ? sql`for update` : sql``
  const [row] = await sql<PersonaRow[]>`
    select ${COLUMNS(sql)} from personas p
    where p.id = ${id} and (p.tenant_id = ${tenantId} or p.tenant_id is null) and p.deleted_at is null
    ${locking}`
  return row
}

export async function insertPersona(sql: Sql, tenantId: number, f: PersonaFields): Promise<PersonaRow> {
  const [row] = await sql<[PersonaRow]>`
    insert into personas as p (tenant_id, name, language, voice, voice_avatar_id, style, greeting, agent_name,
      speaking_rate, attributes)
    values (${tenantId}, ${f.name}, ${f.language}, ${f.voice}, ${f.voiceAvatarId}, ${sql.json(f.style as never)},
      ${f.greeting}, ${f.agentName}, ${f.speakingRate}, ${sql.json(f.attributes as never)})
    returning ${COLUMNS(sql)}`
  return row
}

export async function updatePersona(tx: Tx, id: number, f: PersonaFields): Promise<PersonaRow> {
  const [row] = await tx<[PersonaRow]>`
    update personas as p set name = ${f.name}, language = ${f.language}, voice = ${f.voice},
      voice_avatar_id = ${f.voiceAvatarId}, style = ${tx.json(f.style as never)}, greeting = ${f.greeting},
      agent_name = ${f.agentName}, speaking_rate = ${f.speakingRate}, attributes = ${tx.json(f.attributes as never)},
      updated_at = now()
    where p.id = ${id}
    returning ${COLUMNS(tx)}`
  return row
}

export async function softDeletePersona(tx: Tx, id: number): Promise<void> {
  await tx`update personas set deleted_at = now(), updated_at = now() where id = ${id}`
}

/** A workflow as an assignment sees it: status, its rule book's language and persona, its country. */
export interface WorkflowForPersona {
  readonly id: number
  readonly status: string
  readonly archived: boolean
  /** The current rule book's language and persona; null for a workflow without one. */
  readonly language: string | null
  readonly book_persona: string | null
  readonly country: string
}

const WORKFLOW_COLUMNS = (sql: Sql | Tx) => sql`
  w.id, w.status, w.archived_at is not null as archived, rb.body ->> 'language' as language,
  coalesce(rb.body ->> 'persona', w.persona) as book_persona, t.country`

/** The workspace's workflow, locked for update (assignments are decided under its lock). */
export async function lockWorkflow(tx: Tx, tenantId: number, workflowId: number) {
  const [row] = await tx<WorkflowForPersona[]>`
    select ${WORKFLOW_COLUMNS(tx)}
    from workflows w join tenants t on t.id = w.tenant_id left join rule_books rb on rb.id = w.rule_book_id
    where w.id = ${workflowId} and w.tenant_id = ${tenantId}
    for no key update of w`
  return row
}

/** The workflows assigned to a persona, locked (`update` to reassign them, `share` to hold their status). */
export async function workflowsOf(tx: Tx, personaId: number, lock: "share" | "update"): Promise<WorkflowForPersona[]> {
  const locking = lock === "share" ? tx`for share of w` : tx`for no key update of w`
  return tx<WorkflowForPersona[]>`
    select ${WORKFLOW_COLUMNS(tx)}
    from workflows w join tenants t on t.id = w.tenant_id left join rule_books rb on rb.id = w.rule_book_id
    where w.persona_id = ${personaId}
    order by w.id
    ${locking}`
}
