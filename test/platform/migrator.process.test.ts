// `parley migrate`, a process of its own, migrates the configured database (an empty one) and exits 0.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { emptyDatabase, realServices, spawnServer } from "../support/harness.js"

describe("parley migrate", () => {
  it("migrates the configured database and exits 0", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "parley-cli-"))
    // Embedded: an empty DATABASE_URL and a fresh data directory make a new cluster.
    const db = realServices ? await emptyDatabase() : undefined
    try {
      const env = { DATA_DIR: dataDir, DATABASE_URL: db?.url ?? "" }
      const p = await spawnServer({ args: ["migrate"], env, waitFor: "exit" })
      expect(await p.exited).toBe(0)
      expect(p.lines.find((l) => l["msg"] === "migrations applied")).toBeDefined()
    } finally {
      await db?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 60_000)
})
