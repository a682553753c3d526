// Loads uWebSockets.js's native binary directly, from where its package (@based/uws 6.0.1, the
// v20.51 builds) keeps them: beside its entry, uws_<platform>_<arch>_<abi>.node. Some builds of the
// package fall back to a slow pure-JS server when the binary does not load; we would rather stop at
// start-up and say why.

import type * as Uws from "uWebSockets.js"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket, WebSocket } from "uWebSockets.js"
export type UwsModule = typeof Uws

export class UwsLoadError extends Error {
  override readonly name = "UwsLoadError"
}

let loaded: UwsModule | undefined

export function loadUws(): UwsModule {
  if (loaded) return loaded
  const require = createRequire(import.meta.url)
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
  let binary = file
  try {
    // The package's exports map hides its .node files from a bare specifier: go by its directory.
    binary = join(dirname(require.resolve("uWebSockets.js")), file)
    loaded = require(binary) as UwsModule
  } catch (e) {
    throw new UwsLoadError(
      `the uWebSockets.js native binary did not load (${binary}, Node ${process.version}): ${(e as Error).message}\n` +
        "Parley needs Node 20 or 22 on linux/darwin x64 or arm64 (glibc 2.27+ on Linux); " +
        "it will not run on the JS fallback.",
    )
  }
  return loaded
}
