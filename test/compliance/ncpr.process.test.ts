// The `parley ncpr import` command end to end: a process of its own imports a file into the
// configured database and prints the counts; without a file it prints its usage and exits 1.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { connectPostgres, startEmbeddedPostgres } from "../../src/platform/Db.js"
import { freshDatabase, spawnServer } from "../support/harness.js"

const india = (i: number) => `+9198${String(10_000_000 + i)}`
const national = (i: number) => india(i).slice(3)

describe("parley ncpr import", () => {
  it("imports a file into the configured database and prints the counts", async () => {
    const db = await freshDatabase()
    const dir = mkdtempSync(join(tmpdir(), "parley-ncpr-"))
    try {
      const path = join(dir, "registry.csv")
      writeFileSync(path, `number,preference,op\n${national(1)},0,A\n${national(2)},1#2,A\n+14152000001,0,A\n`)
      const run = await spawnServer({
        args: ["ncpr", "import", path, "--replace"],
        env: { ...db.env, LOG_LEVEL: "warn" },
        waitFor: "exit",
      })
      expect(await run.exited).toBe(0)
      expect(run.lines).toContainEqual({ imported: 2, deleted: 0, skipped: 1 })

      const bad = await spawnServer({
        args: ["ncpr", "import"],
        env: { ...db.env, LOG_LEVEL: "warn" },
        waitFor: "exit",
      })
      expect(await bad.exited).toBe(1)
      expect(bad.stderr()).toContain("usage: parley ncpr import")

      let rows: Array<{ phone_e164: string; preference: string }>
      if (db.env.DATABASE_URL !== undefined) {
        const sql = connectPostgres(db.env.DATABASE_URL, 1)
        rows = await sql`select phone_e164, preference from ncpr_registry order by 1`
        await sql.end()
      } else {
        const pg = await startEmbeddedPostgres(join(db.env.DATA_DIR!, "pglite"))
        const sql = connectPostgres(pg.url, 1)
        rows = await sql`select phone_e164, preference from ncpr_registry order by 1`
        await sql.end()
        await pg.close()
      }
      expect(rows).toEqual([
        { phone_e164: india(1), preference: "0" },
        { phone_e164: india(2), preference: "1,2" },
      ])
    } finally {
      await db.drop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
