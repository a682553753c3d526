// The embedded database on a fresh data directory: its cluster made by a child process (initdb's
// memory is the child's), then served with the shared buffers asked for, and found again on restart.
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { connectPostgres, startEmbeddedPostgres } from "../../src/platform/Db.js"

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe("startEmbeddedPostgres", () => {
  it("makes a fresh directory's cluster, then serves it with the shared buffers asked for", async () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-footprint-"))
    dirs.push(dir)
    const data = join(dir, "pglite")
    const pg = await startEmbeddedPostgres(data, { sharedBuffers: "8MB" })
    const sql = connectPostgres(pg.url, 1)
    try {
      expect(existsSync(join(data, "PG_VERSION"))).toBe(true)
      const [row] = await sql<[{ shared_buffers: string }]>`show shared_buffers`
      expect(row.shared_buffers).toBe("8MB")
      await sql`create table kept (n int)`
      await sql`insert into kept values (42)`
    } finally {
      await sql.end({ timeout: 1 })
      await pg.close()
    }
    // A restart finds the cluster (no second initdb) with its data, under the default settings.
    const again = await startEmbeddedPostgres(data)
    const sql2 = connectPostgres(again.url, 1)
    try {
      expect(await sql2`select n from kept`).toEqual([{ n: 42 }])
      const [row] = await sql2<[{ shared_buffers: string }]>`show shared_buffers`
      expect(row.shared_buffers).toBe("16MB")
    } finally {
      await sql2.end({ timeout: 1 })
      await again.close()
    }
  }, 180_000)
})
