// Builds the operator console (console/) with esbuild: one minified script and its CSS,
// named by content hash, plus index.html and a manifest. Run directly, it writes dist/console/;
// imported, bundleConsole() builds in memory (the api serves that when running from source).
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
export const APP_DIR = join(root, "console")
export const OUT_DIR = join(root, "dist", "console")

const TYPES = { ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8" }

/**
 * How imports other than code and CSS are bundled: inlined only. The server serves .js and .css
 * alone (api/console/assets.ts ASSET_NAME, under a CSP with no font-src), so no loader may emit
 * another file; an icon is a data: URL (img-src allows data:), and a font would fail the build.
 */
export const LOADER = { ".svg": "dataurl" }

/**
 * The page that loads the bundle. No inline script or style: the CSP allows neither. The icon is
 * an empty data: URL so the browser does not ask the API for /favicon.ico.
 */
function indexHtml(scripts, styles) {
  const links = styles.map((s) => `<link rel="stylesheet" href="/console/assets/${s}">`).join("")
  const tags = scripts.map((s) => `<script type="module" src="/console/assets/${s}"></script>`).join("")
  return (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    '<link rel="icon" href="data:,"><title>Parley console</title>' +
    `${links}${tags}</head><body><div id="app"></div>` +
    "<noscript><p>The Parley console needs JavaScript.</p></noscript></body></html>\n"
  )
}

/**
 * Bundles the app in memory: {files: [{name, type, body}], html}. Names carry esbuild's content
 * hash, so a changed file is a new URL and the old one may be cached for ever.
 */
export async function bundleConsole() {
  const esbuild = await import("esbuild")
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: { main: join(APP_DIR, "main.tsx"), console: join(APP_DIR, "console.css") },
    outdir: "/console-out",
    entryNames: "[name].[hash]",
    assetNames: "[name].[hash]",
    bundle: true,
    minify: true,
    format: "esm",
    target: ["chrome110", "firefox110", "safari16"],
    jsx: "automatic",
    jsxImportSource: "preact",
    legalComments: "none",
    loader: LOADER,
    define: { "process.env.NODE_ENV": '"production"' },
    write: false,
    logLevel: "silent",
  })
  const files = result.outputFiles.map((f) => {
    const name = basename(f.path)
    const ext = name.slice(name.lastIndexOf("."))
    return { name, type: TYPES[ext] ?? "application/octet-stream", body: f.contents }
  })
  const scripts = files.filter((f) => f.name.endsWith(".js")).map((f) => f.name)
  const styles = files.filter((f) => f.name.endsWith(".css")).map((f) => f.name)
  return { files, html: indexHtml(scripts, styles) }
}

/** Newest modification time among the app's sources. */
export function newestSource(dir = APP_DIR) {
  let t = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    t = Math.max(t, e.isDirectory() ? newestSource(p) : statSync(p).mtimeMs)
  }
  return t
}

/**
 * What a build is made from: the app's sources, the dependencies it bundles (their versions are
 * package-lock.json's), and this script's options.
 */
export const CONSOLE_INPUTS = [APP_DIR, join(root, "package-lock.json"), fileURLToPath(import.meta.url)]

/** Newest modification time among files and directories (walked); a missing one counts as 0. */
export function newestOf(paths) {
  let t = 0
  for (const p of paths) {
    if (!existsSync(p)) continue
    t = Math.max(t, statSync(p).isDirectory() ? newestSource(p) : statSync(p).mtimeMs)
  }
  return t
}

/** Whether `outDir` (dist/console) is missing or older than any of `inputs`. */
export function consoleStale(outDir = OUT_DIR, inputs = CONSOLE_INPUTS) {
  const manifest = join(outDir, "manifest.json")
  return !existsSync(manifest) || statSync(manifest).mtimeMs < newestOf(inputs)
}

/** Writes dist/console/ (or `outDir`) afresh: index.html, assets/<name>.<hash>.<ext>, manifest.json. */
export async function writeConsole(outDir = OUT_DIR) {
  const { files, html } = await bundleConsole()
  rmSync(outDir, { recursive: true, force: true })
  mkdirSync(join(outDir, "assets"), { recursive: true })
  for (const f of files) writeFileSync(join(outDir, "assets", f.name), f.body)
  writeFileSync(join(outDir, "index.html"), html)
  const assets = files.map((f) => ({
    name: f.name,
    type: f.type,
    bytes: f.body.length,
    sha256: createHash("sha256").update(f.body).digest("hex"),
  }))
  // Written last: its presence (and mtime) says the build is whole.
  writeFileSync(join(outDir, "manifest.json"), `${JSON.stringify({ index: "index.html", assets }, null, 2)}\n`)
  return assets
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const assets = await writeConsole()
  const total = assets.reduce((n, a) => n + a.bytes, 0)
  process.stderr.write(`parley: console built (${assets.length} assets, ${(total / 1024).toFixed(1)} KB)\n`)
}
