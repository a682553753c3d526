// The console's built files, held in memory: index.html and the content-hashed assets of
// dist/console/ (written by `npm run build`), or, when running from source, bundled in memory.
// Requests pick from this fixed set by name; no part of a URL ever reaches the filesystem.
import { existsSync, readFileSync } from "node:fs"
import { gzipSync } from "node:zlib"

export interface Asset {
  readonly type: string
  readonly body: Uint8Array
  /** The body gzipped once at load, for clients that accept it (a third of the bytes). */
  readonly gzipped: Uint8Array
}

export interface ConsoleAssets {
  readonly index: Uint8Array
  readonly assets: ReadonlyMap<string, Asset>
}

/** What scripts/build-console.mjs's bundleConsole() returns. */
interface Bundle {
  readonly files: ReadonlyArray<{ readonly name: string; readonly type: string; readonly body: Uint8Array }>
  readonly html: string
}

interface Manifest {
  readonly assets: ReadonlyArray<{ readonly name: string; readonly type: string }>
}

/** The only asset names there are: <entry>.<esbuild hash>.<js|css>. */
export const ASSET_NAME = /^[A-Za-z0-9_-]{1,64}\.[A-Z0-9]{8}\.(js|css)$/

/** Why there is no console, in words, with what to do. */
export const NOT_BUILT =
  "The operator console was not built: this install has no dist/console/. Run `npm run build` " +
  "(it needs the dev dependencies, so `npm ci` first), then restart the server."

/**
 * Where this process's console comes from, decided once at start-up: bundled in memory (running
 * from source), a build's directory (compiled, built), or nothing (compiled without a build, e.g.
 * `npm ci --omit=dev`, which has no esbuild either): then /console says so, and nothing is retried.
 */
export type ConsoleSource =
  | { readonly kind: "source" }
  | { readonly kind: "dist"; readonly dir: URL }
  | { readonly kind: "missing"; readonly dir: URL }

// Compiled, this file is dist/api/console/assets.js; from source (tsx), api/console/assets.ts.
const fromSource = import.meta.url.endsWith(".ts")
const root = new URL(fromSource ? "../../" : "../../../", import.meta.url)

/** A compiled process's source: the build in `dir` when its manifest (written last) is there. */
export const compiledSource = (dir: URL): ConsoleSource =>
  existsSync(new URL("manifest.json", dir)) ? { kind: "dist", dir } : { kind: "missing", dir }

let source: ConsoleSource = fromSource ? { kind: "source" } : compiledSource(new URL("dist/console/", root))
let loading: Promise<ConsoleAssets> | undefined

/** This process's console source (decided when the module loaded: at start-up). */
export const consoleSource = (): ConsoleSource => source

/**
 * For tests only: serve the build in `dir` as a compiled process serves dist/console/ (a build
 * written there by scripts/build-console.mjs, or nothing). Not a setting: users have one place.
 */
export function serveBuildForTests(dir: URL): void {
  source = compiledSource(dir)
  loading = undefined
}

/**
 * The console's files, loaded once per process; undefined when there is no build to serve. From
 * source the app is bundled in memory, so a test or a `tsx` run always serves the sources as they
 * are (a failed bundle, a syntax error being edited, is tried again by the next request).
 */
export function consoleAssets(): Promise<ConsoleAssets | undefined> {
  const s = source
  if (s.kind === "missing") return Promise.resolve(undefined)
  loading ??= (s.kind === "dist" ? Promise.resolve().then(() => readDist(s.dir)) : bundle()).catch((e: unknown) => {
    loading = undefined
    throw e
  })
  return loading
}

async function bundle(): Promise<ConsoleAssets> {
  const script = new URL("scripts/build-console.mjs", root)
  const { bundleConsole } = (await import(script.href)) as { bundleConsole: () => Promise<Bundle> }
  const built = await bundleConsole()
  return {
    index: new TextEncoder().encode(built.html),
    assets: new Map(built.files.map((f) => [f.name, asset(f.type, f.body)])),
  }
}

function readDist(dir: URL): ConsoleAssets {
  const manifest = JSON.parse(readFileSync(new URL("manifest.json", dir), "utf8")) as Manifest
  const assets = new Map<string, Asset>()
  for (const a of manifest.assets) {
    // The manifest is ours, but a name is still checked before it becomes a path.
    if (!ASSET_NAME.test(a.name)) throw new Error(`dist/console/manifest.json: unexpected asset name ${a.name}`)
    assets.set(a.name, asset(a.type, readFileSync(new URL(`assets/${a.name}`, dir))))
  }
  return { index: readFileSync(new URL("index.html", dir)), assets }
}

const asset = (type: string, body: Uint8Array): Asset => ({ type, body, gzipped: gzipSync(body, { level: 9 }) })
