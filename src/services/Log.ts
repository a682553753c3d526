// The process logger (pino) as an Effect service. One JSON line per event; request lines carry
// the request id so a 5xx can be traced from the response header to the log.
import { Context, Layer } from "effect"
import { pino, type Logger } from "pino"
import type { Config } from "../config.js"

export class Log extends Context.Tag("parley/Log")<Log, Logger>() {
  static layer(logger: Logger): Layer.Layer<Log> {
    return Layer.succeed(Log, logger)
  }
}

/**
 * Logs to stdout. `buffered`: lines are gathered into 4 KiB writes instead of one write(2) each
 * (a line per request adds up), flushed every second and synchronously when the process exits.
 */
export function makeLogger(config: Pick<Config, "logLevel">, bindings: Record<string, unknown> = {}, opts: { buffered?: boolean } = {}): Logger {
  const destination = opts.buffered ? pino.destination({ dest: 1, sync: false, minLength: 4096 }) : pino.destination({ dest: 1, sync: true })
  if (opts.buffered) {
    // A quiet server still shows its lines within a second.
    setInterval(() => destination.flush(), 1000).unref()
    process.once("exit", () => destination.flushSync())
  }
  return pino(
    {
      level: config.logLevel,
      base: { pid: process.pid, ...bindings },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  )
}
