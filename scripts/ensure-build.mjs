// Builds dist/ when any TypeScript source is newer than the last build, so `npm start` works on a
// fresh clone and after a pull without a separate build step.
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
// tsc re-emits only what changed, so the build leaves its own stamp to compare against.
const stamp = join(root, "dist", ".build-stamp")

function newest(dir) {
  let t = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) t = Math.max(t, newest(p))
    else if (e.name.endsWith(".ts")) t = Math.max(t, statSync(p).mtimeMs)
  }
  return t
}

const sources = ["src", "api", "runtime", "machines"].map((d) => join(root, d)).filter(existsSync)
const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0
const changed = Math.max(
  ...sources.map(newest),
  statSync(join(root, "tsconfig.json")).mtimeMs,
  statSync(join(root, "package-lock.json")).mtimeMs,
)
if (changed > built) {
  process.stderr.write("parley: building (tsc)…\n")
  execFileSync(
    process.execPath,
    [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(root, "tsconfig.build.json")],
    { stdio: "inherit", cwd: root },
  )
  writeFileSync(stamp, new Date().toISOString())
}
// The console is bundled separately (esbuild, not tsc) and has its own staleness check.
const { consoleStale, writeConsole } = await import("./build-console.mjs")
if (consoleStale()) {
  process.stderr.write("parley: building the console (esbuild)…\n")
  await writeConsole()
}
