// Forward-only schema migrations: numbered plain-SQL files in migrations/, applied in order under
// an advisory lock (so concurrent starters apply each file once) and recorded with a checksum.
import { createHash } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import type { Sql } from "./Db.js"
import { MIGRATIONS_DIR } from "./paths.js"

export interface MigrationFile {
  readonly version: number
  readonly name: string
  readonly sql: string
  readonly checksum: string
}

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/
// Any constant works; it only has to be the same in every process of a deployment.
const LOCK_KEY = 7_263_901_113

export class MigrationError extends Error {
  override readonly name = "MigrationError"
}

export function readMigrations(dir: string = MIGRATIONS_DIR): MigrationFile[] {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort()
  const seen = new Set<number>()
  return files.map((file) => {
    const m = FILE_NAME.exec(file)
    if (!m) throw new MigrationError(`migration file name ${file} is not NNNN_name.sql`)
    const version = Number(m[1])
    if (seen.has(version)) throw new MigrationError(`two migrations share version ${version}`)
    seen.add(version)
    const text = readFileSync(join(dir, file), "utf8")
    return { version, name: m[2]!, sql: text, checksum: createHash("sha256").update(text).digest("hex") }
  })
}

/**
 * Applies pending migrations in one transaction holding an advisory lock; returns the versions
 * applied. Refuses to run when an applied file was edited or removed: landed migrations are
 * never changed, a later file corrects them.
 */
export async function migrate(sql: Sql, files: MigrationFile[] = readMigrations()): Promise<number[]> {
  return sql.begin(async (tx) => {
    // A migration may rewrite a large table, and waits here while another process migrates: the
    // pool's statement_timeout is for requests, not for this.
    await tx`set local statement_timeout = 0`
    await tx`select pg_advisory_xact_lock(${LOCK_KEY})`
    await tx`
      create table if not exists schema_migrations (
        version integer primary key,
        name text not null,
        checksum text not null,
        applied_at timestamptz not null default now()
      )`
    const applied = await tx<{ version: number; name: string; checksum: string }[]>`
      select version, name, checksum from schema_migrations order by version`
    const byVersion = new Map(files.map((f) => [f.version, f]))
    for (const row of applied) {
      const file = byVersion.get(row.version)
      if (!file) throw new MigrationError(`migration ${row.version}_${row.name} is applied but its file is missing`)
      if (file.checksum !== row.checksum)
        throw new MigrationError(`migration ${row.version}_${row.name} was edited after it was applied`)
    }
    const done = new Set(applied.map((r) => r.version))
    const pending = files.filter((f) => !done.has(f.version))
    for (const file of pending) {
      await tx.unsafe(file.sql)
      await tx`insert into schema_migrations (version, name, checksum) values (${file.version}, ${file.name},
        ${file.checksum})`
    }
    return pending.map((f) => f.version)
  }) as Promise<number[]>
}
