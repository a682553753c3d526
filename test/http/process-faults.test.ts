// The parley process and the faults nobody caught: an unhandled rejection is logged and the
// server keeps serving; an uncaught exception is logged at fatal, the server stops gracefully and
// the process exits non-zero so its supervisor starts a clean one.
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDatabase, type SpawnedServer, spawnServer } from "../support/harness.js"

// Loaded into the server process before main.ts: signals that make it misbehave on demand.
const FAULTS = `
process.on("SIGUSR2", () => { Promise.reject(new Error("a rejection nobody awaited")) })
process.on("SIGHUP", () => { setImmediate(() => { throw new Error("an exception nobody caught") }) })
`

describe("faults nobody caught", () => {
  let server: SpawnedServer
  let drop: () => Promise<void>

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-faults-"))
    const preload = join(dir, "faults.mjs")
    writeFileSync(preload, FAULTS)
    const db = await freshDatabase()
    drop = db.drop
    server = await spawnServer({ env: { ...db.env, NODE_OPTIONS: `--import ${preload}` } })
  }, 60_000)
  afterAll(async () => {
    server?.child.kill("SIGKILL")
    await drop?.()
  })

  it("logs an unhandled rejection and keeps serving", async () => {
    server.child.kill("SIGUSR2")
    await expect.poll(() => server.lines.find((l) => l.msg === "unhandled rejection")).toBeTruthy()
    const line = server.lines.find((l) => l.msg === "unhandled rejection")!
    expect(line.level).toBe("error")
    expect(line.err).toMatchObject({ message: "a rejection nobody awaited" })
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(server.child.exitCode).toBeNull()
  })

  it("logs an uncaught exception at fatal, stops gracefully and exits non-zero", async () => {
    server.child.kill("SIGHUP")
    const code = await Promise.race([server.exited, new Promise((r) => setTimeout(() => r("still running"), 20_000))])
    expect(code).toBe(1)
    const fatal = server.lines.find((l) => l.level === "fatal")
    expect(fatal).toMatchObject({
      msg: "uncaught exception: shutting down",
      err: { message: "an exception nobody caught" },
    })
    // The graceful stop ran: HTTP closed and the services disposed before the exit.
    expect(server.lines.map((l) => l.msg)).toEqual(expect.arrayContaining(["http closed", "stopped"]))
  }, 30_000)
})
