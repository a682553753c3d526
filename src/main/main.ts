#!/usr/bin/env node
// The parley command: `parley serve [--role all|api|runtime]`, `parley migrate` and `parley ncpr
// import <file|-> [--replace]`. Parses the environment once, runs the command, and turns
// SIGTERM/SIGINT into a graceful stop.
import { createReadStream } from "node:fs"
import { Cause, Effect, Exit, Layer } from "effect"
import { consoleSource, NOT_BUILT } from "../../api/console/assets.js"
import { consoleUrl } from "../../api/console/console-url.js"
import { importNcpr } from "../compliance/ncpr.import.js"
import { AppConfig } from "../platform/AppConfig.js"
import { type Config, ConfigError, loadConfig } from "../platform/config.js"
import { Db, DbLive } from "../platform/Db.js"
import type { Role } from "../platform/Instance.js"
import { flushLogs, Log, makeLogger, releaseStdout } from "../platform/Log.js"
import { migrate } from "../platform/Migrator.js"
import { serve } from "./serve.js"

const USAGE = `usage: parley serve [--role all|api|runtime]
       parley migrate
       parley ncpr import <file|-> [--replace]`

function fail(message: string): never {
  process.stderr.write(`parley: ${message}\n`)
  exit(1)
}

/** Exits without waiting on a stdout reader that stopped reading (see releaseStdout). */
function exit(code: number): never {
  releaseStdout()
  process.exit(code)
}

type Command =
  | { command: "serve"; role: Role }
  | { command: "migrate" }
  | { command: "ncpr-import"; file: string; replace: boolean }

function parseArgs(argv: string[]): Command {
  const [command = "serve", ...rest] = argv
  if (command === "migrate" && rest.length === 0) return { command }
  if (command === "ncpr") {
    const [sub, ...opts] = rest
    const files = opts.filter((o) => o !== "--replace")
    if (sub !== "import" || files.length !== 1 || (files[0]!.startsWith("--") && files[0] !== "-"))
      fail(`usage: parley ncpr import <file|-> [--replace]`)
    return { command: "ncpr-import", file: files[0]!, replace: opts.includes("--replace") }
  }
  if (command !== "serve") fail(`unknown command ${JSON.stringify(command)}\n${USAGE}`)
  let role: Role = "all"
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!
    const value = arg.startsWith("--role=") ? arg.slice(7) : arg === "--role" ? rest[++i] : undefined
    if (value === undefined) fail(`unknown option ${JSON.stringify(arg)}\n${USAGE}`)
    if (value !== "all" && value !== "api" && value !== "runtime")
      fail(`--role must be all, api or runtime (got ${JSON.stringify(value)})`)
    role = value
  }
  return { command: "serve", role }
}

async function runMigrate(config: Config): Promise<void> {
  const logger = makeLogger(config)
  const program = Effect.gen(function* () {
    const db = yield* Db
    return yield* Effect.promise(() => migrate(db.sql))
  }).pipe(Effect.provide(DbLive.pipe(Layer.provide(Layer.merge(AppConfig.layer(config), Log.layer(logger))))))
  const exit = await Effect.runPromiseExit(Effect.scoped(program))
  if (Exit.isFailure(exit)) {
    const squashed = Cause.squash(exit.cause)
    fail(`migration failed: ${squashed instanceof Error ? squashed.message : Cause.pretty(exit.cause)}`)
  }
  logger.info({ applied: exit.value }, exit.value.length > 0 ? "migrations applied" : "database is up to date")
  logger.flush()
}

/** Imports the national registry file (or stdin for "-") and prints {imported, deleted, skipped}. */
async function runNcprImport(config: Config, file: string, replace: boolean): Promise<void> {
  const logger = makeLogger(config)
  const program = Effect.gen(function* () {
    const db = yield* Db
    yield* Effect.promise(() => migrate(db.sql))
    const input = file === "-" ? process.stdin : createReadStream(file)
    return yield* Effect.promise(() => importNcpr(db.sql, input, { replace }))
  }).pipe(Effect.provide(DbLive.pipe(Layer.provide(Layer.merge(AppConfig.layer(config), Log.layer(logger))))))
  const exit = await Effect.runPromiseExit(Effect.scoped(program))
  if (Exit.isFailure(exit)) {
    const cause = Cause.squash(exit.cause)
    fail(`ncpr import failed: ${cause instanceof Error ? cause.message : Cause.pretty(exit.cause)}`)
  }
  logger.flush()
  process.stdout.write(`${JSON.stringify(exit.value)}\n`)
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2))
  let config: Config
  try {
    config = loadConfig()
  } catch (e) {
    if (e instanceof ConfigError) fail(e.message)
    throw e
  }
  // One-off commands may run long statements (a migration rewriting a table, a registry import).
  if (args.command === "migrate") return runMigrate({ ...config, dbStatementTimeoutMs: 0 })
  if (args.command === "ncpr-import")
    return runNcprImport({ ...config, dbStatementTimeoutMs: 0 }, args.file, args.replace)

  const logger = makeLogger(config, { role: args.role }, { buffered: true })
  let running: Awaited<ReturnType<typeof serve>> | undefined
  let stopping = false
  let exitCode = 0
  /** Stops gracefully (bounded by the shutdown timeout and a hard deadline), then exits. */
  const stopAndExit = (code: number): void => {
    // A crash during a clean stop still makes the exit non-zero.
    exitCode = Math.max(exitCode, code)
    if (stopping) return
    stopping = true
    // Should the stop itself hang (the state is unknown after a crash), exit anyway.
    setTimeout(
      () => void flushLogs(logger).finally(() => exit(Math.max(exitCode, 1))),
      config.shutdownTimeoutMs + 5_000,
    ).unref()
    void (running?.stop() ?? Promise.resolve()).then(
      async () => {
        await flushLogs(logger)
        exit(exitCode)
      },
      async (e: unknown) => {
        logger.error({ err: e }, "shutdown failed")
        await flushLogs(logger)
        exit(Math.max(exitCode, 1))
      },
    )
  }
  // Installed here, in the command, not in serve(): tests run servers in their own process.
  // A rejection nobody awaited is a bug in one request or loop, not a broken process: log, go on.
  process.on("unhandledRejection", (reason) => logger.error({ err: reason }, "unhandled rejection"))
  // A thrown exception nobody caught leaves the process in an unknown state: stop and exit non-zero
  // so the supervisor starts a clean one; in-flight requests get the shutdown's grace period.
  process.on("uncaughtException", (err, origin) => {
    logger.fatal({ err, origin }, "uncaught exception: shutting down")
    stopAndExit(1)
  })
  try {
    running = await serve({ role: args.role, config, logger })
  } catch (e) {
    const cause = e instanceof Error ? e : Cause.isCause(e) ? Cause.squash(e) : e
    logger.fatal({ err: cause }, "start-up failed")
    await flushLogs(logger)
    fail(`start-up failed: ${cause instanceof Error ? cause.message : String(cause)}`)
  }
  // Where a person opens the operator console: said in the log line, and in plain words on a
  // terminal (`npm start`), where a JSON line is easy to miss. A compiled install without the
  // console's build says so once, here, rather than on every request (/console answers 503).
  const url =
    running.port === undefined
      ? undefined
      : consoleUrl({ publicBaseUrl: config.publicBaseUrl, host: config.host, port: running.port })
  const built = consoleSource().kind !== "missing"
  logger.info(
    { role: args.role, port: running.port, instance: running.instance.id, console_url: url, console_built: built },
    "parley started",
  )
  if (url !== undefined && !built) logger.warn({ console_url: url }, NOT_BUILT)
  logger.flush()
  if (url !== undefined && process.stderr.isTTY)
    process.stderr.write(built ? `parley: console at ${url}\n` : `parley: ${NOT_BUILT}\n`)

  let signals = 0
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) {
      logger.warn({ signal }, "second signal: exiting now")
      exit(1)
    }
    logger.info({ signal }, "shutting down")
    stopAndExit(0)
  }
  process.on("SIGTERM", onSignal)
  process.on("SIGINT", onSignal)
}

void main()
