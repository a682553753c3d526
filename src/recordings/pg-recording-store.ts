// The Postgres recording store: a recording's bytes as 256 KiB rows of recording_chunks, keyed by the
// recordings row's id (the key is that id as text). A range read fetches only the rows it covers.
import type { Sql, Tx } from "../platform/Db.js"
import { CHUNK_BYTES, chunkExtent, chunksBetween, deleteChunks, writeChunks } from "./recording-chunks.repo.js"
import { type ByteRange, checkRange, type RecordingStore, RecordingStoreError } from "./recording-store.js"

/** Chunk rows fetched per query while reading (1 MiB): memory stays bounded whatever the size. */
const ROWS_PER_READ = 4

/** SQLSTATE 23503: the recordings row the chunks would belong to is not there. */
const isForeignKeyViolation = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { code?: unknown }).code === "23503"

/** The recordings row id a pg key names, or undefined for a key that cannot be one. */
const idOf = (key: string): number | undefined => (/^[1-9]\d{0,15}$/.test(key) ? Number(key) : undefined)

export class PgRecordingStore implements RecordingStore {
  readonly kind = "pg" as const
  constructor(private readonly sql: Sql) {}

  /** Stores the bytes of recordings row `key` (which must exist), replacing any it had. */
  async put(key: string, bytes: Uint8Array, _contentType: string): Promise<void> {
    await this.sql.begin((tx) => this.putIn(tx, key, bytes))
  }

  /**
   * put, inside the caller's transaction: the recordings service writes a row and its bytes in one
   * transaction, so a row never exists without its bytes.
   */
  async putIn(tx: Tx, key: string, bytes: Uint8Array): Promise<void> {
    const id = idOf(key)
    if (id === undefined) throw new RecordingStoreError("pg", "put", key, "not_found", "no recording has this key")
    try {
      await writeChunks(tx, id, bytes)
    } catch (e) {
      if (isForeignKeyViolation(e))
        throw new RecordingStoreError("pg", "put", key, "not_found", "no recording has this key", { cause: e })
      throw e
    }
  }

  read(key: string, range?: ByteRange): AsyncIterable<Uint8Array> {
    checkRange(range)
    const sql = this.sql
    return {
      async *[Symbol.asyncIterator]() {
        const id = idOf(key)
        const extent = id === undefined ? undefined : await chunkExtent(sql, id)
        if (id === undefined || extent === undefined)
          throw new RecordingStoreError("pg", "read", key, "not_found", "no recording has this key")
        const start = range?.start ?? 0
        const end = Math.min(range?.end ?? extent.bytes - 1, extent.bytes - 1)
        if (range !== undefined && start >= extent.bytes)
          throw new RecordingStoreError("pg", "read", key, "range", `starts past its ${extent.bytes} bytes`)
        if (end < start) return // the whole of an empty recording
        const lastSeq = Math.floor(end / CHUNK_BYTES)
        let seq = Math.floor(start / CHUNK_BYTES)
        while (seq <= lastSeq) {
          const rows = await chunksBetween(sql, id, seq, Math.min(lastSeq, seq + ROWS_PER_READ - 1))
          for (const row of rows) {
            // A gap means the recording was replaced or deleted while it was being read.
            if (row.seq !== seq) break
            const base = seq * CHUNK_BYTES
            const from = Math.max(0, start - base)
            const to = Math.min(row.data.byteLength, end - base + 1)
            if (to > from) yield row.data.subarray(from, to)
            seq++
          }
          if (rows.length === 0 || rows.at(-1)!.seq !== seq - 1)
            throw new RecordingStoreError("pg", "read", key, "not_found", "it was deleted while being read")
        }
      },
    }
  }

  async delete(key: string): Promise<void> {
    const id = idOf(key)
    if (id !== undefined) await deleteChunks(this.sql, id)
  }
}
