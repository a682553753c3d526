// Migrations on an empty database: applied in order once, recorded with checksums, safe to run
// from several processes at once, refused when a landed file was edited or removed.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectPostgres, type Sql } from "../../src/platform/Db.js"
import { MigrationError, migrate, readMigrations } from "../../src/platform/Migrator.js"
import { emptyDatabase } from "../support/harness.js"

let url: string
let cleanup: () => Promise<void>
const clients: Sql[] = []
const client = () => {
  const c = connectPostgres(url, 1)
  clients.push(c)
  return c
}

beforeAll(async () => {
  const db = await emptyDatabase()
  url = db.url
  cleanup = db.drop
}, 60_000)

afterAll(async () => {
  for (const c of clients) await c.end({ timeout: 1 })
  await cleanup?.()
})

describe("migrate", () => {
  it("applies every file once, in order, even when several processes start together", async () => {
    const files = readMigrations()
    expect(files.map((f) => f.version)).toEqual([...files.map((f) => f.version)].sort((a, b) => a - b))
    // Real Postgres: separate connections race for the advisory lock. PGlite is one session, so
    // its clients share one connection and queue instead.
    const [a, b] = process.env.DATABASE_URL ? [client(), client()] : [client(), undefined]
    const results = await Promise.all([migrate(a, files), migrate(b ?? a, files)])
    expect([...results[0], ...results[1]].sort((x, y) => x - y)).toEqual(files.map((f) => f.version))
    const rows = await a<
      { version: number; checksum: string }[]
    >`select version, checksum from schema_migrations order by version`
    expect(rows).toEqual(files.map((f) => ({ version: f.version, checksum: f.checksum })))
    const [{ n }] = await a<[{ n: number }]>`select count(*)::int as n from objections`
    expect(n).toBeGreaterThanOrEqual(10)
    expect(await migrate(a, files)).toEqual([])
  })

  it("refuses to run when an applied migration was edited or removed", async () => {
    const sql = clients[0]!
    const files = readMigrations()
    const edited = files.map((f, i) => (i === 0 ? { ...f, sql: `${f.sql}\n-- edit`, checksum: "0".repeat(64) } : f))
    await expect(migrate(sql, edited)).rejects.toThrow(MigrationError)
    await expect(migrate(sql, edited)).rejects.toThrow(/edited after it was applied/)
    await expect(migrate(sql, files.slice(1))).rejects.toThrow(/file is missing/)
  })

  it("rolls back a failing migration whole", async () => {
    const sql = clients[0]!
    const files = readMigrations()
    const broken = [
      ...files,
      {
        version: 9999,
        name: "broken",
        sql: "create table half_done (id int); select * from no_such_table;",
        checksum: "x",
      },
    ]
    await expect(migrate(sql, broken)).rejects.toThrow()
    const [{ exists }] = await sql<[{ exists: boolean }]>`select to_regclass('half_done') is not null as exists`
    expect(exists).toBe(false)
    const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from schema_migrations where version = 9999`
    expect(n).toBe(0)
  })
})
