// Loads uWebSockets.js's native binary directly. The package's own entry falls back to a slow
// pure-JS server when the binary does not load; we would rather stop at start-up and say why.

import type * as Uws from "uWebSockets.js"
import { createRequire } from "node:module"

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from "uWebSockets.js"
export type UwsModule = typeof Uws

export class UwsLoadError extends Error {
  override readonly name = "UwsLoadError"
}

let loaded: UwsModule | undefined

export function loadUws(): UwsModule {
  if (loaded) return loaded
  const require = createRequire(import.meta.url)
  const binary = `uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
  try {
    loaded = require(binary) as UwsModule
  } catch (e) {
    throw new UwsLoadError(
      `the uWebSockets.js native binary did not load (${binary}, Node ${process.version}): ${(e as Error).message}\n` +
        `Parley needs Node 20 on linux/darwin x64 or arm64 with glibc 2.31+; it will not run on the JS fallback.`,
    )
  }
  return loaded
}
