// The embedded database's memory: what PGlite is started with, and its first-run initdb done in a
// child process so that run's memory is given back to the system when it exits.
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { PROJECT_ROOT } from "./paths.js"

/** Settings of the embedded database (PGLITE_* in the README). */
export interface EmbeddedOptions {
  /**
   * Postgres's shared_buffers, in Postgres units ("16MB", "8192kB"). PGlite starts Postgres with
   * 128MB, which is zeroed inside its WASM memory at start, so the whole of it is resident at once.
   */
  readonly sharedBuffers?: string
  /** How V8 compiles PGlite's WASM to machine code (see applyWasmTierUp); default "hot". */
  readonly wasmTierUp?: WasmTierUp
}

/**
 * "hot": V8 optimises only PGlite's hottest functions (ten times V8's tiering budget, one compile
 * thread); "off": baseline code only (smallest, slower SQL); "v8": V8's own defaults.
 */
export type WasmTierUp = "hot" | "off" | "v8"
export const WASM_TIER_UP = ["hot", "off", "v8"] as const satisfies readonly WasmTierUp[]

/** The embedded database's shared_buffers when none is set: resident from the start, see above. */
export const DEFAULT_PGLITE_SHARED_BUFFERS = "16MB"

/** A Postgres memory size: a whole number with kB, MB or GB. */
export const PG_MEMORY_SIZE = /^[1-9][0-9]{0,8}(kB|MB|GB)$/

/** The size in bytes of a Postgres memory size ("16MB" → 16777216); undefined when malformed. */
export function pgMemoryBytes(size: string): number | undefined {
  const m = PG_MEMORY_SIZE.exec(size)
  if (m === null) return undefined
  const unit = m[1] === "kB" ? 1024 : m[1] === "MB" ? 1024 ** 2 : 1024 ** 3
  return Number(size.slice(0, -2)) * unit
}

/** PGlite's start parameters: its own defaults, plus the memory settings given. */
export function pgliteStartParams(defaults: readonly string[], opts: EmbeddedOptions): string[] {
  const sharedBuffers = opts.sharedBuffers ?? DEFAULT_PGLITE_SHARED_BUFFERS
  if (pgMemoryBytes(sharedBuffers) === undefined)
    throw new RangeError(`shared_buffers must be a size such as 16MB, got ${JSON.stringify(sharedBuffers)}`)
  return [...defaults, "-c", `shared_buffers=${sharedBuffers}`]
}

/**
 * Sets V8's WebAssembly tiering for PGlite's module, compiled when PGlite starts. V8 compiles all of
 * PGlite's ~9 MB module with its baseline compiler (Liftoff), then recompiles hot functions with
 * TurboFan on its worker threads, whose scratch memory stays in those threads' malloc arenas: an
 * idle server held ~80 MB more than with baseline code only, ~30 MB more than with "hot". The flags
 * are process-wide and apply to modules compiled after this call; "v8" restores V8's defaults.
 */
export function applyWasmTierUp(mode: WasmTierUp): void {
  const flags = {
    hot: ["--no-liftoff-only", `--wasm-tiering-budget=${V8_TIERING_BUDGET * 10}`, "--wasm-num-compilation-tasks=1"],
    off: ["--liftoff-only"],
    v8: ["--no-liftoff-only", `--wasm-tiering-budget=${V8_TIERING_BUDGET}`, "--wasm-num-compilation-tasks=128"],
  }[mode]
  setFlagsFromString(flags.join(" "))
}

/** V8's default --wasm-tiering-budget (V8 11.3, Node 20; its compilation tasks default to 128). */
const V8_TIERING_BUDGET = 1_800_000

/** Whether `dir` already holds a database cluster (initdb has run there). */
export const hasCluster = (dir: string): boolean => existsSync(join(dir, "PG_VERSION"))

/**
 * Creates the cluster in `dir` in a child process. PGlite runs initdb in a second WASM instance of
 * its own, and the ~450 MB that instance touches stays resident in the process that ran it after
 * it closes (the idle server was ~880 MB after a first start, ~380 MB after a restart); a child's
 * memory goes back to the system when it exits.
 */
export function initdbInChild(dir: string): Promise<void> {
  // --eval resolves bare specifiers from the working directory: the project's node_modules.
  const script =
    `const { PGlite } = await import("@electric-sql/pglite");` +
    `const db = await PGlite.create(${JSON.stringify(dir)});` +
    `await db.close();`
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--input-type=module", "--eval", script],
      { cwd: PROJECT_ROOT, maxBuffer: 16 * 1024 * 1024, timeout: 10 * 60_000 },
      (err, _stdout, stderr) => {
        if (err === null) return resolve()
        const detail = stderr.trim().split("\n").slice(-5).join("\n")
        reject(
          new Error(`initdb of the embedded database in ${dir} failed: ${err.message}${detail ? `\n${detail}` : ""}`),
        )
      },
    )
  })
}
