// The embedded database's memory settings: PGLITE_* parsed and refused by name, PGlite started with
// them, and a fresh data directory's cluster made by a child process (initdb's memory is the child's).
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { ConfigError, loadConfig } from "../../src/platform/config.js"
import { connectPostgres, startEmbeddedPostgres } from "../../src/platform/Db.js"
import { pgliteStartParams, pgMemoryBytes } from "../../src/platform/pglite.options.js"

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe("PGLITE_* settings", () => {
  it("default to 16MB of shared buffers and tier-up of the hottest functions only", () => {
    expect(loadConfig({}).pglite).toEqual({ sharedBuffers: "16MB", wasmTierUp: "hot" })
    expect(loadConfig({ PGLITE_SHARED_BUFFERS: " 64MB ", PGLITE_WASM_TIER_UP: "off" }).pglite).toEqual({
      sharedBuffers: "64MB",
      wasmTierUp: "off",
    })
  })

  it.each(["16", "16mb", "0MB", "64kB", "2GB", "-1MB", "16MB; drop table x", "1e3MB", "99999999999kB"])(
    "refuses PGLITE_SHARED_BUFFERS=%j, naming the variable",
    (value) => {
      expect(() => loadConfig({ PGLITE_SHARED_BUFFERS: value })).toThrow(ConfigError)
      expect(() => loadConfig({ PGLITE_SHARED_BUFFERS: value })).toThrow(/PGLITE_SHARED_BUFFERS/)
    },
  )

  it("refuses an unknown PGLITE_WASM_TIER_UP", () => {
    expect(() => loadConfig({ PGLITE_WASM_TIER_UP: "turbo" })).toThrow(/PGLITE_WASM_TIER_UP/)
  })

  it("reads Postgres sizes and keeps PGlite's own start parameters", () => {
    expect(pgMemoryBytes("128kB")).toBe(128 * 1024)
    expect(pgMemoryBytes("16MB")).toBe(16 * 1024 ** 2)
    expect(pgMemoryBytes("1GB")).toBe(1024 ** 3)
    expect(pgMemoryBytes("16 MB")).toBeUndefined()
    expect(pgliteStartParams(["--single"], { sharedBuffers: "8MB" })).toEqual(["--single", "-c", "shared_buffers=8MB"])
    expect(() => pgliteStartParams([], { sharedBuffers: "8MB -c fsync=off" })).toThrow(RangeError)
  })
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
