// The process logger (pino) as an Effect service. One JSON line per event; request lines carry
// the request id so a 5xx can be traced from the response header to the log.
import { Context, Layer } from "effect"
import { type Logger, pino } from "pino"
import type { Config } from "./config.js"

export class Log extends Context.Tag("parley/Log")<Log, Logger>() {
  static layer(logger: Logger): Layer.Layer<Log> {
    return Layer.succeed(Log, logger)
  }
}

// Once the process is on its way out, a full stdout pipe must not keep it alive: sonic-boom (and
// pino's own exit hook, which flushes synchronously) would otherwise retry EAGAIN forever.
let exiting = false
const retryEAGAIN = () => !exiting

/** Stop waiting for a stdout reader: call right before process.exit. Unwritten lines are dropped. */
export function releaseStdout(): void {
  exiting = true
}

/**
 * Logs to stdout, or to `destination` when one is given (a test server's lines, read back by its
 * suite). `buffered`: lines are gathered into 4 KiB writes instead of one write(2) each (a line
 * per request adds up) and flushed every second; call flushLogs before exiting. There is
 * deliberately no synchronous flush at exit: if whatever reads stdout stops reading, a blocking
 * write would keep the process from ever exiting.
 */
export function makeLogger(
  config: Pick<Config, "logLevel">,
  bindings: Record<string, unknown> = {},
  opts: { buffered?: boolean; destination?: pino.DestinationStream } = {},
): Logger {
  return pino(
    {
      level: config.logLevel,
      base: { pid: process.pid, ...bindings },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? stdoutDestination(opts.buffered ?? false),
  )
}

function stdoutDestination(buffered: boolean): pino.DestinationStream {
  const destination = buffered
    ? pino.destination({ dest: 1, sync: false, minLength: 4096, retryEAGAIN })
    : pino.destination({ dest: 1, sync: true, retryEAGAIN })
  // A reader that went away is no reason to crash; there is nowhere left to report it anyway.
  destination.on("error", () => {})
  // A quiet server still shows its lines within a second.
  if (buffered) setInterval(() => destination.flush(), 1000).unref()
  return destination
}

/** Writes out buffered lines, waiting at most `timeoutMs` for a reader that has stopped reading. */
export function flushLogs(logger: Logger, timeoutMs = 1000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs)
    timer.unref()
    try {
      logger.flush(() => {
        clearTimeout(timer)
        resolve()
      })
    } catch {
      resolve()
    }
  })
}
