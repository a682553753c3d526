// Runs once before all suites: migrates one template database through the real migrator, so each
// suite starts from a copy in well under a second (embedded: a copied PGlite directory; real
// Postgres: CREATE DATABASE ... TEMPLATE). At the end the template goes, and with it every
// database and data directory the suites made from it: the servers a worker shares between its
// suites (harness.ts, sharedTestServer) live until the worker exits and are never stopped one by one.

import { randomBytes } from "node:crypto"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connectPostgres, startEmbeddedPostgres, withDatabase } from "../../src/platform/Db.js"
import { migrate } from "../../src/platform/Migrator.js"
import { copyPrefix } from "./template.js"

export default async function setup({ provide }: { provide: (key: string, value: unknown) => void }) {
  process.env.LOG_LEVEL ??= "silent"
  const scratch = mkdtempSync(join(tmpdir(), "parley-tests-"))
  provide("scratch", scratch)
  const removeScratch = () => rmSync(scratch, { recursive: true, force: true })
  const databaseUrl = process.env.DATABASE_URL
  if (databaseUrl === undefined) {
    const dir = join(scratch, "template")
    // An empty cluster first, kept as it is for the suites that migrate one themselves (initdb
    // takes seconds; a copy, a fraction of one).
    await (await startEmbeddedPostgres(join(scratch, "empty", "pglite"))).close()
    cpSync(join(scratch, "empty"), dir, { recursive: true })
    const pg = await startEmbeddedPostgres(join(dir, "pglite"))
    const sql = connectPostgres(pg.url, 1)
    await migrate(sql)
    await sql.end()
    await pg.close()
    provide("template", { kind: "pglite", dataDir: dir, empty: join(scratch, "empty") })
    return removeScratch
  }
  const name = `parley_tpl_${randomBytes(4).toString("hex")}`
  const admin = connectPostgres(databaseUrl, 1)
  await admin.unsafe(`create database ${name}`)
  const tpl = connectPostgres(withDatabase(databaseUrl, name), 1)
  await migrate(tpl)
  await tpl.end()
  provide("template", { kind: "postgres", database: name, url: databaseUrl })
  return async () => {
    const copies = await admin<Array<{ datname: string }>>`
      select datname from pg_database where datname like ${`${copyPrefix(name)}%`}`
    for (const { datname } of copies) await admin.unsafe(`drop database if exists ${datname} with (force)`)
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.end()
    removeScratch()
  }
}
