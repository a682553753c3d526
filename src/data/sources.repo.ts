// SQL of data sources: the sources, their rows (replaced atomically on each fetch) and their chat.
// The only writer of data_sources, data_source_rows and data_source_messages.

import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"

export type SourceKind = "csv" | "url" | "storefront"
export type SourceStatus = "pending" | "fetching" | "ready" | "failed"
export type MessageRole = "user" | "agent" | "system"

export interface SourceRow {
  readonly id: number
  readonly tenant_id: number
  readonly name: string
  readonly kind: SourceKind
  readonly status: SourceStatus
  readonly url: string | null
  readonly row_count: number
  readonly columns: string[]
  readonly last_fetched_at: Date | null
  readonly error: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

export interface StoredRow {
  readonly row_no: number
  readonly data: Record<string, unknown>
}

export interface MessageRow {
  readonly id: number
  readonly source_id: number
  readonly role: MessageRole
  readonly text: string
  readonly data: Record<string, unknown>
  readonly created_at: Date
}

const SOURCE_COLUMNS = (sql: Sql | Tx) =>
  sql`id, tenant_id, name, kind, status, url, row_count, columns, last_fetched_at, error, created_at, updated_at`

/** A fetch not finished within this long is taken to have died with its process. */
const STALE_FETCH_MS = 120_000

export async function createSource(
  sql: Sql | Tx,
  s: { tenantId: number; name: string; kind: SourceKind; url: string | null; status: SourceStatus },
): Promise<SourceRow> {
  const [row] = await sql<[SourceRow]>`
    insert into data_sources (tenant_id, name, kind, url, status)
    values (${s.tenantId}, ${s.name}, ${s.kind}, ${s.url}, ${s.status})
    returning ${SOURCE_COLUMNS(sql)}`
  return row
}

/** The tenant's source, or undefined (another workspace's source reads as missing). */
export async function getSource(sql: Sql | Tx, tenantId: number, id: number): Promise<SourceRow | undefined> {
  const [row] = await sql<[SourceRow?]>`
    select ${SOURCE_COLUMNS(sql)} from data_sources where id = ${id} and tenant_id = ${tenantId}`
  return row
}

export async function listSources(sql: Sql, tenantId: number): Promise<SourceRow[]> {
  const rows = await sql<SourceRow[]>`
    select ${SOURCE_COLUMNS(sql)} from data_sources where tenant_id = ${tenantId} order by id desc`
  return [...rows]
}

/** Deletes the source; its rows and chat go with it (on delete cascade). */
export async function deleteSource(sql: Sql, tenantId: number, id: number): Promise<boolean> {
  const res = await sql`delete from data_sources where id = ${id} and tenant_id = ${tenantId}`
  return res.count > 0
}

/** A page of rows in file order. */
export async function rowsPage(
  sql: Sql,
  sourceId: number,
  page: { limit: number; offset: number },
): Promise<{ rows: StoredRow[]; total: number }> {
  const rows = await sql<StoredRow[]>`
    select row_no, data from data_source_rows where source_id = ${sourceId}
    order by row_no limit ${page.limit} offset ${page.offset}`
  const [{ total }] = await sql<[{ total: number }]>`
    select count(*)::int as total from data_source_rows where source_id = ${sourceId}`
  return { rows: [...rows], total }
}

/** The first `limit` rows in file order (the chat computes over these). */
export async function allRows(sql: Sql | Tx, sourceId: number, limit: number): Promise<StoredRow[]> {
  const rows = await sql<StoredRow[]>`
    select row_no, data from data_source_rows where source_id = ${sourceId} order by row_no limit ${limit}`
  return [...rows]
}

const INSERT_CHUNK = 5_000

async function insertRows(
  tx: Tx,
  sourceId: number,
  rows: ReadonlyArray<Record<string, unknown>>,
  sign: 1 | -1,
): Promise<void> {
  for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
    const chunk = rows.slice(start, start + INSERT_CHUNK)
    await tx`
      insert into data_source_rows (source_id, row_no, data)
      select ${sourceId}, ${sign}::int * (${start}::int + i::int), d::jsonb
      from unnest(${tx.array(
        chunk.map((r) => JSON.stringify(r)),
        25,
      )}::text[]) with ordinality as x(d, i)`
  }
}

/**
 * Replaces a source's rows in one transaction and marks it ready. The new rows go in under
 * negative numbers first so the old and new sets can be compared (rows added and removed,
 * counted as multisets), then the old rows go and the new ones take their numbers 1…N.
 */
export async function replaceRows(
  sql: Sql,
  r: {
    tenantId: number
    sourceId: number
    rows: ReadonlyArray<Record<string, unknown>>
    columns: ReadonlyArray<string>
    now: Date
  },
): Promise<{ added: number; removed: number; count: number } | undefined> {
  return (await sql.begin(async (tx) => {
    const [src] = await tx<[{ id: number }?]>`
      select id from data_sources where id = ${r.sourceId} and tenant_id = ${r.tenantId} for update`
    if (src === undefined) return undefined
    await tx`set local jit = off`
    await insertRows(tx, r.sourceId, r.rows, -1)
    const [diff] = await tx<[{ added: number; removed: number }]>`
      select
        (select count(*)::int from (
          select data from data_source_rows where source_id = ${r.sourceId} and row_no < 0
          except all
          select data from data_source_rows where source_id = ${r.sourceId} and row_no > 0) a) as added,
        (select count(*)::int from (
          select data from data_source_rows where source_id = ${r.sourceId} and row_no > 0
          except all
          select data from data_source_rows where source_id = ${r.sourceId} and row_no < 0) b) as removed`
    await tx`delete from data_source_rows where source_id = ${r.sourceId} and row_no > 0`
    await tx`update data_source_rows set row_no = -row_no where source_id = ${r.sourceId} and row_no < 0`
    await tx`
      update data_sources set status = 'ready', error = null, row_count = ${r.rows.length},
        columns = ${tx.json([...r.columns] as never)}, last_fetched_at = ${r.now}, updated_at = ${r.now}
      where id = ${r.sourceId}`
    return { added: diff.added, removed: diff.removed, count: r.rows.length }
  })) as { added: number; removed: number; count: number } | undefined
}

/**
 * Asks for a fetch: the source becomes pending unless a fetch is running (and not stale).
 * Returns the source as it now stands, or undefined when it is not the tenant's.
 */
export async function requestFetch(sql: Sql, tenantId: number, id: number, now: Date): Promise<SourceRow | undefined> {
  const staleBefore = new Date(now.getTime() - STALE_FETCH_MS)
  const [row] = await sql<[SourceRow?]>`
    update data_sources set status = 'pending', updated_at = ${now}
    where id = ${id} and tenant_id = ${tenantId} and (status <> 'fetching' or updated_at < ${staleBefore})
    returning ${SOURCE_COLUMNS(sql)}`
  return row ?? (await getSource(sql, tenantId, id))
}

/** The worker's claim: pending → fetching, exactly once (a running fetch is reclaimed only when stale). */
export async function claimFetch(sql: Sql, tenantId: number, id: number, now: Date): Promise<SourceRow | undefined> {
  const staleBefore = new Date(now.getTime() - STALE_FETCH_MS)
  const [row] = await sql<[SourceRow?]>`
    update data_sources set status = 'fetching', error = null, updated_at = ${now}
    where id = ${id} and tenant_id = ${tenantId}
      and (status = 'pending' or (status = 'fetching' and updated_at < ${staleBefore}))
    returning ${SOURCE_COLUMNS(sql)}`
  return row
}

/** A fetch failed: the old rows stay, the reason is kept. */
export async function markFailed(sql: Sql, tenantId: number, id: number, error: string, now: Date): Promise<void> {
  await sql`
    update data_sources set status = 'failed', error = ${error}, updated_at = ${now}
    where id = ${id} and tenant_id = ${tenantId}`
}

export async function appendMessage(
  sql: Sql | Tx,
  m: { tenantId: number; sourceId: number; role: MessageRole; text: string; data: Record<string, unknown> },
): Promise<MessageRow> {
  const [row] = await sql<[MessageRow]>`
    insert into data_source_messages (tenant_id, source_id, role, text, data)
    values (${m.tenantId}, ${m.sourceId}, ${m.role}, ${m.text}, ${sql.json(m.data as never)})
    returning id, source_id, role, text, data, created_at`
  return row
}

/** The chat, oldest first, after `after_id` when given. */
export async function listMessages(
  sql: Sql | Tx,
  tenantId: number,
  sourceId: number,
  page: { after_id?: number | undefined; limit: number },
): Promise<MessageRow[]> {
  const after = page.after_id === undefined ? sql`` : sql`and id > ${page.after_id}`
  const rows = await sql<MessageRow[]>`
    select id, source_id, role, text, data, created_at from data_source_messages
    where source_id = ${sourceId} and tenant_id = ${tenantId} ${after}
    order by id limit ${page.limit}`
  return [...rows]
}

/** A data-subject erase (src/dsr/): rows naming the contact go, and the chat messages quoting them. */
export async function eraseContactData(
  tx: Tx,
  m: ContactMatch,
): Promise<{ data_source_rows: number; data_source_messages: number }> {
  const rows = await tx`
    delete from data_source_rows where source_id in (select id from data_sources where tenant_id = ${m.tenantId})
      and ${m.holds("data")}`
  const messages = await tx`
    delete from data_source_messages
    where tenant_id = ${m.tenantId} and (${m.mentions("text")} or ${m.mentions("data")})`
  return { data_source_rows: rows.count, data_source_messages: messages.count }
}
