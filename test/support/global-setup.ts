// Runs once before all suites: migrates one template database through the real migrator, so each
// suite starts from a copy in well under a second (embedded: a copied PGlite directory; real
// Postgres: CREATE DATABASE ... TEMPLATE). The template is removed at the end.

import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connectPostgres, startEmbeddedPostgres, withDatabase } from "../../src/platform/Db.js"
import { migrate } from "../../src/platform/Migrator.js"

export default async function setup({ provide }: { provide: (key: string, value: unknown) => void }) {
  process.env.LOG_LEVEL ??= "silent"
  const databaseUrl = process.env.DATABASE_URL
  if (databaseUrl === undefined) {
    const dir = mkdtempSync(join(tmpdir(), "parley-tpl-"))
    const pg = await startEmbeddedPostgres(join(dir, "pglite"))
    const sql = connectPostgres(pg.url, 1)
    await migrate(sql)
    await sql.end()
    await pg.close()
    provide("template", { kind: "pglite", dataDir: dir })
    return () => rmSync(dir, { recursive: true, force: true })
  }
  const name = `parley_tpl_${randomBytes(4).toString("hex")}`
  const admin = connectPostgres(databaseUrl, 1)
  await admin.unsafe(`create database ${name}`)
  const tpl = connectPostgres(withDatabase(databaseUrl, name), 1)
  await migrate(tpl)
  await tpl.end()
  provide("template", { kind: "postgres", database: name, url: databaseUrl })
  return async () => {
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.end()
  }
}
