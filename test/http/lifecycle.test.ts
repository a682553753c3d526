// The process as an operator meets it: configuration errors stop start-up naming the variable,
// roles that need shared services say so, SIGTERM drains in-flight work and exits 0.
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { type AddressInfo, createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ConfigError, loadConfig } from "../../src/platform/config.js"
import { PROJECT_ROOT } from "../../src/platform/paths.js"
import { freshDatabase, spawnServer, startTestServer, type TestServer } from "../support/harness.js"
import { newProbeState, probeRoutes } from "../support/probes.js"

describe("configuration", () => {
  it("parses defaults and values", () => {
    const c = loadConfig({})
    expect(c).toMatchObject({
      host: "0.0.0.0",
      port: 8080,
      databaseUrl: undefined,
      natsUrl: undefined,
      bodyLimitBytes: 1_048_576,
      busNamespace: "",
    })
    expect(loadConfig({ PORT: "9000", DATABASE_URL: "postgres://u@h/db", LOG_LEVEL: "debug" })).toMatchObject({
      port: 9000,
      databaseUrl: "postgres://u@h/db",
      logLevel: "debug",
    })
    // Empty means unset, as shells and compose files often leave it.
    expect(loadConfig({ DATABASE_URL: "", NATS_URL: " " })).toMatchObject({
      databaseUrl: undefined,
      natsUrl: undefined,
    })
  })

  it("names every malformed variable", () => {
    let err: unknown
    try {
      loadConfig({ PORT: "eighty", DATABASE_URL: "mysql://x", LOG_LEVEL: "loud", SYSTEM_KEY: "short" })
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(ConfigError)
    for (const name of ["PORT", "DATABASE_URL", "LOG_LEVEL", "SYSTEM_KEY"])
      expect((err as Error).message).toContain(name)
  })
})

describe("the parley process", () => {
  it("stops at start-up on a malformed variable, naming it", async () => {
    const p = await spawnServer({ env: { PORT: "99999" }, waitFor: "exit" })
    expect(await p.exited).toBe(1)
    expect(p.stderr()).toMatch(/PORT/)
  })

  it("refuses --role api without a shared database and bus", async () => {
    const p = await spawnServer({ role: "api", env: {}, waitFor: "exit" })
    expect(await p.exited).toBe(1)
    expect(p.stderr()).toMatch(/DATABASE_URL and NATS_URL/)
  })

  it("names an unreachable database or bus, without its password", async () => {
    const db = await spawnServer({ env: { DATABASE_URL: "postgres://app:hunter2@127.0.0.1:1/nope" }, waitFor: "exit" })
    expect(await db.exited).toBe(1)
    expect(db.stderr()).toMatch(/could not reach the database at postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/nope/)
    expect(db.stderr() + JSON.stringify(db.lines)).not.toContain("hunter2")
    const dataDir = (await freshDatabase()).env
    const bus = await spawnServer({ env: { ...dataDir, NATS_URL: "nats://127.0.0.1:1" }, waitFor: "exit" })
    expect(await bus.exited).toBe(1)
    expect(bus.stderr()).toMatch(/could not connect to NATS at nats:\/\/127\.0\.0\.1:1/)
  })

  it("rejects an unknown command or role with usage", async () => {
    const p = await spawnServer({ args: ["serve", "--role", "boss"], waitFor: "exit" })
    expect(await p.exited).toBe(1)
    expect(p.stderr()).toMatch(/--role must be all, api or runtime/)
  })

  it("serves, then exits 0 on SIGTERM after logging one line per request", async () => {
    const db = await freshDatabase()
    try {
      const p = await spawnServer({ env: db.env })
      const res = await fetch(`${p.url}/pricing`, { headers: { "x-request-id": "life-1" } })
      expect(res.status).toBe(200)
      await expect.poll(() => p.lines.some((l) => l["req_id"] === "life-1")).toBe(true)
      const line = p.lines.find((l) => l["req_id"] === "life-1")!
      expect(line).toMatchObject({ msg: "request", method: "GET", path: "/pricing", status: 200 })
      expect(typeof line["ms"]).toBe("number")
      p.child.kill("SIGTERM")
      expect(await p.exited).toBe(0)
      expect(p.lines.some((l) => l["msg"] === "stopped")).toBe(true)
    } finally {
      await db.drop()
    }
  })
})

describe("a server whose log reader stopped reading", () => {
  it("still exits promptly on SIGTERM", async () => {
    const db = await freshDatabase()
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const p = (probe.address() as AddressInfo).port
        probe.close(() => resolve(p))
      })
    })
    // stdout is a pipe nobody reads: once its buffer is full, every log write would block.
    const child = spawn(process.execPath, ["--import", "tsx", join(PROJECT_ROOT, "src/main/main.ts"), "serve"], {
      cwd: PROJECT_ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        ...db.env,
        HOST: "127.0.0.1",
        PORT: String(port),
        LOG_LEVEL: "info",
        BUS_NAMESPACE: `t${Date.now()}`,
      },
      stdio: ["ignore", "pipe", "ignore"],
    })
    child.stdout!.pause()
    const exited = new Promise<number | string>((resolve) =>
      child.on("exit", (code, signal) => resolve(code ?? signal ?? -1)),
    )
    try {
      await expect
        .poll(
          () =>
            fetch(`http://127.0.0.1:${port}/healthz`).then(
              (r) => r.status,
              () => 0,
            ),
          { timeout: 30_000, interval: 200 },
        )
        .toBe(200)
      // Each request logs a line: far more than a pipe buffer holds.
      for (let i = 0; i < 40; i++)
        await Promise.all(
          Array.from({ length: 50 }, () => fetch(`http://127.0.0.1:${port}/pricing`).then((r) => r.arrayBuffer())),
        )
      const t0 = Date.now()
      child.kill("SIGTERM")
      const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r("still running"), 20_000))])
      expect(code).not.toBe("still running")
      expect(Date.now() - t0).toBeLessThan(15_000)
    } finally {
      child.kill("SIGKILL")
      await db.drop()
    }
  }, 60_000)
})

describe("graceful shutdown", () => {
  const probes = newProbeState()
  let srv: TestServer
  beforeAll(async () => {
    srv = await startTestServer({ extraRoutes: probeRoutes(probes) })
  })
  afterAll(async () => srv?.stop())

  it("finishes in-flight requests, ends streams, then refuses new connections", async () => {
    const slow = fetch(`${srv.url}/test/slow?ms=1000`)
    const streaming = await fetch(`${srv.url}/test/stream?n=10000`)
    expect(streaming.status).toBe(200)
    const stream = readSlowly(streaming)
    await expect.poll(() => stream.received).toBeGreaterThan(512 * 1024)
    const stopped = srv.running.stop()
    const res = await slow
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ slept: 1000 })
    // The open stream was ended, not left hanging, and ended cleanly (see the next test).
    await stream.done
    await stopped
    expect(probes.streamEnded).toBe(true)
    expect(stream.intact).toBe(true)
    expect(stream.received).toBe(probes.streamWritten * 64 * 1024)
    await expect(fetch(`${srv.url}/pricing`)).rejects.toThrow()
  })

  it("delivers the rest of an ended stream to a slow reader before closing its connection", async () => {
    const state = newProbeState()
    const own = await startTestServer({ extraRoutes: probeRoutes(state) })
    try {
      const streaming = await fetch(`${own.url}/test/stream?n=10000`)
      expect(streaming.status).toBe(200)
      // The client reads slowly, before and during shutdown: the producer is always held up by
      // backpressure, so when shutdown ends the stream uWS still holds bytes the socket has not
      // taken. Nothing else is in flight, so nothing else keeps the server open meanwhile.
      const stream = readSlowly(streaming)
      await expect.poll(() => stream.received).toBeGreaterThan(512 * 1024)
      const stopped = own.running.stop()
      // The reader gets `done`, not "terminated: other side closed": every chunk the producer
      // wrote, then the terminating chunk.
      await stream.done
      await stopped
      expect(state.streamEnded).toBe(true)
      expect(state.streamWritten).toBeLessThan(10_000)
      expect(stream.intact).toBe(true)
      expect(stream.received).toBe(state.streamWritten * 64 * 1024)
    } finally {
      await own.stop()
    }
  })

  it("does not wait past SHUTDOWN_TIMEOUT_MS for a stream whose client never reads", async () => {
    const state = newProbeState()
    const own = await startTestServer({ env: { SHUTDOWN_TIMEOUT_MS: "400" }, extraRoutes: probeRoutes(state) })
    try {
      const streaming = await fetch(`${own.url}/test/stream?n=10000`)
      expect(streaming.status).toBe(200)
      // Never read: wait until the socket buffers are full and the producer is held.
      await expect
        .poll(async () => {
          const before = state.streamWritten
          await sleep(100)
          return before > 0 && state.streamWritten === before
        })
        .toBe(true)
      const t0 = performance.now()
      await own.running.stop()
      const took = performance.now() - t0
      // It waited for the stream to drain (it never does), then gave up at the timeout.
      expect(took).toBeGreaterThanOrEqual(350)
      expect(took).toBeLessThan(5_000)
      // What the server still held went with the connection: the body ends abruptly.
      await expect(streaming.arrayBuffer()).rejects.toThrow()
    } finally {
      await own.stop()
    }
  })
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Reads a /test/stream body to its end, pausing after every read, and checks it on the way: each
 * 64 KiB chunk is filled with its index mod 251, so bytes must arrive in order and intact.
 * `done` rejects if the body ends without its terminating chunk.
 */
function readSlowly(
  res: Response,
  pauseMs = 20,
): { readonly received: number; readonly intact: boolean; readonly done: Promise<void> } {
  const reader = res.body!.getReader()
  let received = 0
  let intact = true
  const expected = (offset: number) => Math.floor(offset / 65536) % 251
  const done = (async () => {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      for (let j = 0; j < value.length; j += 1024) if (value[j] !== expected(received + j)) intact = false
      if (value.length > 0 && value[value.length - 1] !== expected(received + value.length - 1)) intact = false
      received += value.length
      await sleep(pauseMs)
    }
  })()
  return {
    get received() {
      return received
    },
    get intact() {
      return intact
    },
    done,
  }
}

describe("the listening port", () => {
  /** A free port, as the kernel hands one out and takes it back. */
  const freePort = () =>
    new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo
        probe.close(() => resolve(port))
      })
    })
  const start = (port: number, dataDir: string) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/main/main.ts", "serve", "--role", "all"], {
      cwd: PROJECT_ROOT,
      env: {
        ...process.env,
        DATABASE_URL: "",
        NATS_URL: "",
        DATA_DIR: dataDir,
        LOG_LEVEL: "info",
        HOST: "127.0.0.1",
        PORT: String(port),
      },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let output = ""
    const started = new Promise<boolean>((resolve) => {
      const seen = (d: Buffer) => {
        output += d
        if (output.includes("parley started")) resolve(true)
      }
      child.stdout.on("data", seen)
      child.stderr.on("data", seen)
      child.once("exit", () => resolve(false))
    })
    return { child, started, output: () => output }
  }

  it("is the server's alone: a second server on it fails to start instead of sharing its requests", async () => {
    const port = await freePort()
    const dirs = [mkdtempSync(join(tmpdir(), "parley-port-")), mkdtempSync(join(tmpdir(), "parley-port-"))]
    const children: ReturnType<typeof start>[] = []
    try {
      const first = start(port, dirs[0]!)
      children.push(first)
      expect(await first.started).toBe(true)
      const second = start(port, dirs[1]!)
      children.push(second)
      expect(await second.started).toBe(false)
      expect(second.child.exitCode).not.toBe(0)
      expect(second.output()).toMatch(new RegExp(`could not listen on 127\\.0\\.0\\.1:${port}`))
    } finally {
      for (const { child } of children) {
        if (child.exitCode !== null || child.signalCode !== null) continue
        child.kill("SIGTERM")
        await new Promise((r) => child.once("exit", r))
      }
      for (const d of dirs) rmSync(d, { recursive: true, force: true })
    }
  }, 90_000)
})
