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

// Compiled, this file is dist/api/console/assets.js; from source (tsx), api/console/assets.ts.
const fromSource = import.meta.url.endsWith(".ts")
const root = new URL(fromSource ? "../../" : "../../../", import.meta.url)
const distDir = new URL("dist/console/", root)

let loading: Promise<ConsoleAssets> | undefined

/**
 * The console's files, loaded once per process. From source the app is bundled in memory, so a
 * test or a `tsx` run always serves the sources as they are; compiled, it reads dist/console/
 * (kept current by `npm run build` and `npm start`), bundling only when that is missing.
 */
export function consoleAssets(): Promise<ConsoleAssets> {
  loading ??= load().catch((e: unknown) => {
    // A failed load is retried by the next request rather than remembered.
    loading = undefined
    throw e
  })
  return loading
}

async function load(): Promise<ConsoleAssets> {
  if (!fromSource && existsSync(new URL("manifest.json", distDir))) return readDist()
  const script = new URL("scripts/build-console.mjs", root)
  const { bundleConsole } = (await import(script.href)) as { bundleConsole: () => Promise<Bundle> }
  const built = await bundleConsole()
  return {
    index: new TextEncoder().encode(built.html),
    assets: new Map(built.files.map((f) => [f.name, asset(f.type, f.body)])),
  }
}

function readDist(): ConsoleAssets {
  const manifest = JSON.parse(readFileSync(new URL("manifest.json", distDir), "utf8")) as Manifest
  const assets = new Map<string, Asset>()
  for (const a of manifest.assets) {
    // The manifest is ours, but a name is still checked before it becomes a path.
    if (!ASSET_NAME.test(a.name)) throw new Error(`dist/console/manifest.json: unexpected asset name ${a.name}`)
    assets.set(a.name, asset(a.type, readFileSync(new URL(`assets/${a.name}`, distDir))))
  }
  return { index: readFileSync(new URL("index.html", distDir)), assets }
}

const asset = (type: string, body: Uint8Array): Asset => ({ type, body, gzipped: gzipSync(body, { level: 9 }) })
