// The parsed configuration as an Effect service, so every layer and handler reads the same
// values and tests can provide their own.
import { Context, Layer } from "effect"
import type { Config } from "./config.js"

export class AppConfig extends Context.Tag("parley/AppConfig")<AppConfig, Config>() {
  static layer(config: Config): Layer.Layer<AppConfig> {
    return Layer.succeed(AppConfig, config)
  }
}
