// A Parley server in its own process for the fuzzer (outside vitest, so not test/support/harness):
// embedded PGlite in a temporary directory, or a fresh database on DATABASE_URL's server, with the
// system key and credentials key set so every route is reachable.
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { connectPostgres, withDatabase } from "../../src/platform/Db.js"
import { PROJECT_ROOT } from "../../src/platform/paths.js"

export interface FuzzServer {
  readonly url: string
  readonly pid: number
  readonly systemKey: string
  readonly child: ChildProcess
  /** Log lines at error level or above, as printed. */
  readonly errors: Array<Record<string, unknown>>
  stop(): Promise<void>
}

export async function startFuzzServer(extraEnv: Record<string, string> = {}): Promise<FuzzServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-fuzz-"))
  const systemKey = randomBytes(24).toString("hex")
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "info",
    DATA_DIR: dataDir,
    BUS_NAMESPACE: `fz${randomBytes(4).toString("hex")}`,
    SYSTEM_KEY: systemKey,
    CREDENTIALS_MASTER_KEY: randomBytes(32).toString("base64"),
    PAYMENTS: "stub",
    SIGNUPS_PER_IP_HOUR: "100000",
    OTP_GUESSES_PER_IP_HOUR: "100000",
    PREVIEWS_ANON_PER_IP_HOUR: "100000",
    ...extraEnv,
  }
  let dropDatabase = async () => {}
  const url = process.env.DATABASE_URL
  if (url !== undefined && env.DATABASE_URL === undefined) {
    const name = `parley_fuzz_${randomBytes(5).toString("hex")}`
    const admin = connectPostgres(url, 1)
    await admin.unsafe(`create database ${name}`)
    env.DATABASE_URL = withDatabase(url, name)
    dropDatabase = async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`)
      await admin.end()
    }
  }
  if (process.env.NATS_URL !== undefined) env.NATS_URL ??= process.env.NATS_URL

  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(PROJECT_ROOT, "src/main/main.ts"), "serve", "--role", "all"],
    {
      cwd: PROJECT_ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    },
  )
  const errors: Array<Record<string, unknown>> = []
  let stderr = ""
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-10_000)))
  const exited = new Promise<void>((r) => child.once("exit", () => r()))
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (!line.startsWith("{")) return
      let parsed: Record<string, unknown>
      try {
        parsed = JSON.parse(line) as Record<string, unknown>
      } catch {
        return
      }
      if (parsed["msg"] === "parley started") resolve(parsed["port"] as number)
      if (typeof parsed["level"] === "number" && parsed["level"] >= 50 && errors.length < 200) errors.push(parsed)
    })
    void exited.then(() => reject(new Error(`server exited before starting: ${stderr}`)))
  })
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    systemKey,
    child,
    errors,
    stop: async () => {
      child.kill("SIGKILL")
      await exited
      await dropDatabase()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
