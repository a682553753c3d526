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

export function makeLogger(config: Pick<Config, "logLevel">, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level: config.logLevel,
    base: { pid: process.pid, ...bindings },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  })
}
