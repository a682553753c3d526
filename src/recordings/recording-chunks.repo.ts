// SQL of recording_chunks, the Postgres store's bytes: the only file that writes the table. A
// recording's bytes are rows of CHUNK_BYTES (the last shorter), deleted with their recordings row.
import type { Sql, Tx } from "../platform/Db.js"

/** Bytes per chunk row: a range read fetches only the rows it covers. */
export const CHUNK_BYTES = 256 * 1024
/** Chunk rows per insert statement (2 MiB of parameters). */
const ROWS_PER_INSERT = 8

/**
 * Replaces the recording's chunks with `bytes` (one empty chunk for no bytes, so an empty recording
 * is told apart from a missing one). Rejects with SQLSTATE 23503 when the recordings row is missing.
 */
export async function writeChunks(tx: Tx, recordingId: number, bytes: Uint8Array): Promise<void> {
  await tx`delete from recording_chunks where recording_id = ${recordingId}`
  const count = Math.max(1, Math.ceil(bytes.byteLength / CHUNK_BYTES))
  for (let first = 0; first < count; first += ROWS_PER_INSERT) {
    const rows = []
    for (let seq = first; seq < Math.min(count, first + ROWS_PER_INSERT); seq++) {
      const part = bytes.subarray(seq * CHUNK_BYTES, (seq + 1) * CHUNK_BYTES)
      rows.push({ recording_id: recordingId, seq, data: Buffer.from(part.buffer, part.byteOffset, part.byteLength) })
    }
    await tx`insert into recording_chunks ${tx(rows, "recording_id", "seq", "data")}`
  }
}

/** Chunks `fromSeq`..`toSeq` of the recording that exist, in order. */
export const chunksBetween = (
  sql: Sql | Tx,
  recordingId: number,
  fromSeq: number,
  toSeq: number,
): Promise<ReadonlyArray<{ seq: number; data: Buffer }>> =>
  sql<{ seq: number; data: Buffer }[]>`
    select seq, data from recording_chunks
    where recording_id = ${recordingId} and seq between ${fromSeq} and ${toSeq}
    order by seq`

/** How many chunks the recording has and its size in bytes; undefined when it has none. */
export async function chunkExtent(
  sql: Sql | Tx,
  recordingId: number,
): Promise<{ chunks: number; bytes: number } | undefined> {
  const [row] = await sql<[{ chunks: number; bytes: number | null }]>`
    select count(*)::int as chunks, sum(length(data))::bigint as bytes
    from recording_chunks where recording_id = ${recordingId}`
  return row.chunks === 0 ? undefined : { chunks: row.chunks, bytes: row.bytes ?? 0 }
}

/** Deletes the recording's chunks; how many rows went. */
export const deleteChunks = async (sql: Sql | Tx, recordingId: number): Promise<number> =>
  (await sql`delete from recording_chunks where recording_id = ${recordingId}`).count
