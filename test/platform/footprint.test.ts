// The embedded database's memory settings: PGLITE_* parsed and refused by name, and PGlite's start
// parameters made from them. PGlite started with them on a fresh cluster, which a child process
// makes, is in footprint.process.test.ts.
import { describe, expect, it } from "vitest"
import { ConfigError, loadConfig } from "../../src/platform/config.js"
import { pgliteStartParams, pgMemoryBytes } from "../../src/platform/pglite.options.js"

describe("PGLITE_* settings", () => {
  it("default to 16MB of shared buffers and tier-up of the hottest functions only", () => {
    expect(loadConfig({}).pglite).toEqual({ sharedBuffers: "16MB", wasmTierUp: "hot" })
    expect(loadConfig({ PGLITE_SHARED_BUFFERS: " 64MB ", PGLITE_WASM_TIER_UP: "off" }).pglite).toEqual({
      sharedBuffers: "64MB",
      wasmTierUp: "off",
    })
  })

  it.each(["16", "16mb", "0MB", "64kB", "2GB", "-1MB", "16MB; drop table x", "1e3MB", "99999999999kB"])(
    "refuses PGLITE_SHARED_BUFFERS=%j, naming the variable",
    (value) => {
      expect(() => loadConfig({ PGLITE_SHARED_BUFFERS: value })).toThrow(ConfigError)
      expect(() => loadConfig({ PGLITE_SHARED_BUFFERS: value })).toThrow(/PGLITE_SHARED_BUFFERS/)
    },
  )

  it("refuses an unknown PGLITE_WASM_TIER_UP", () => {
    expect(() => loadConfig({ PGLITE_WASM_TIER_UP: "turbo" })).toThrow(/PGLITE_WASM_TIER_UP/)
  })

  it("reads Postgres sizes and keeps PGlite's own start parameters", () => {
    expect(pgMemoryBytes("128kB")).toBe(128 * 1024)
    expect(pgMemoryBytes("16MB")).toBe(16 * 1024 ** 2)
    expect(pgMemoryBytes("1GB")).toBe(1024 ** 3)
    expect(pgMemoryBytes("16 MB")).toBeUndefined()
    expect(pgliteStartParams(["--single"], { sharedBuffers: "8MB" })).toEqual(["--single", "-c", "shared_buffers=8MB"])
    expect(() => pgliteStartParams([], { sharedBuffers: "8MB -c fsync=off" })).toThrow(RangeError)
  })
})
