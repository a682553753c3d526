// The postgres driver as installed (scripts/patch-postgres.mjs mends 3.4.9): a connection whose
// server side dies rejects its queries instead of crashing the process. Run in a child process, since the
// unmended driver throws where only the process's last handler sees it.
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { realServices } from "../support/harness.js"

const run = promisify(execFile)

const script = (url: string) => `
import postgres from "postgres"
process.on("uncaughtException", (e) => { console.log(JSON.stringify({ uncaught: e.message })); process.exit(3) })
const admin = postgres(${JSON.stringify(url)}, { max: 1 })
const sql = postgres(${JSON.stringify(url)}, { max: 1 })
// A reserved connection cannot be swapped by the pool, so every query after its backend dies meets the
// closed socket (porsager/postgres#1208's reproduction).
const reserved = await sql.reserve()
const [{ pid }] = await reserved\`select pg_backend_pid() as pid\`
await admin\`select pg_terminate_backend(\${pid})\`
const codes = []
for (let i = 0; i < 3; i++) {
  try { await reserved\`select 1\`; codes.push("ok") } catch (e) { codes.push(e.code) }
  await new Promise((r) => setTimeout(r, 50))
}
console.log(JSON.stringify({ codes }))
await Promise.all([sql.end({ timeout: 1 }), admin.end({ timeout: 1 })])
`

describe.runIf(realServices)("the postgres driver, when the server closes a connection", () => {
  it("rejects the queries on it and keeps the process up", async () => {
    const url = process.env.DATABASE_URL as string
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script(url)], {
      cwd: process.cwd(),
      timeout: 20_000,
    }).catch((e: { stdout: string }) => e)
    const result = JSON.parse(stdout.trim().split("\n").at(-1) as string)
    expect(result.uncaught).toBeUndefined()
    expect(result.codes).toHaveLength(3)
    // The first meets the reset (or the server's own word, 57P01), the later ones the closed socket.
    for (const code of result.codes) expect(["ECONNRESET", "57P01", "CONNECTION_CLOSED"]).toContain(code)
    expect(result.codes.at(-1)).toBe("CONNECTION_CLOSED")
  }, 30_000)
})
