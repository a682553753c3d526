// The console's bundle budget (150 KB gzipped, script and CSS together) and the build's output:
// hashed names that change with the content, a manifest that matches the files, index.html naming
// them, only files the server serves; and when `npm start` rebuilds it (sources, lockfile, script).
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { gzipSync } from "node:zlib"
import { afterAll, describe, expect, it } from "vitest"
import { ASSET_NAME } from "../../api/console/assets.js"
import {
  APP_DIR,
  bundleConsole,
  CONSOLE_INPUTS,
  consoleStale,
  LOADER,
  writeConsole,
} from "../../scripts/build-console.mjs"
import { PROJECT_ROOT } from "../../src/platform/paths.js"

const BUDGET_GZIPPED = 150 * 1024

const out = mkdtempSync(join(tmpdir(), "parley-console-"))
afterAll(() => rmSync(out, { recursive: true, force: true }))

describe("the console build", () => {
  it("stays within 150 KB gzipped for all its JS and CSS", async () => {
    const { files } = await bundleConsole()
    const measured = files.filter((f) => /\.(js|css)$/.test(f.name))
    expect(measured.length).toBeGreaterThanOrEqual(2)
    const gz = measured.reduce((n, f) => n + gzipSync(f.body, { level: 9 }).length, 0)
    const raw = measured.reduce((n, f) => n + f.body.length, 0)
    // Printed so a growing bundle is visible before it fails.
    console.info(`console bundle: ${(raw / 1024).toFixed(1)} KB, ${(gz / 1024).toFixed(1)} KB gzipped`)
    expect(gz).toBeLessThanOrEqual(BUDGET_GZIPPED)
  })

  it("writes hashed assets, index.html naming them and a manifest that matches the files", async () => {
    const assets = await writeConsole(out)
    const onDisk = readdirSync(join(out, "assets")).sort()
    expect(assets.map((a) => a.name).sort()).toEqual(onDisk)
    for (const a of assets) {
      expect(a.name).toMatch(/^[A-Za-z0-9_-]+\.[A-Z0-9]{8}\.(js|css)$/)
      const body = readFileSync(join(out, "assets", a.name))
      expect(a.bytes).toBe(body.length)
      expect(a.sha256).toBe(createHash("sha256").update(body).digest("hex"))
    }
    const manifest = JSON.parse(readFileSync(join(out, "manifest.json"), "utf8"))
    expect(manifest).toEqual({ index: "index.html", assets })
    const html = readFileSync(join(out, "index.html"), "utf8")
    for (const a of assets) expect(html).toContain(`/console/assets/${a.name}`)
    // The same sources give the same names: the hash is of the content, not the time.
    const again = await bundleConsole()
    expect(again.files.map((f) => f.name).sort()).toEqual(onDisk)
  })
})

describe("the build's files", () => {
  it("are only ones the server serves: .js and .css by the asset pattern, each with a known type", async () => {
    const { files } = await bundleConsole()
    for (const f of files) {
      expect(f.name).toMatch(ASSET_NAME)
      expect(f.type).toMatch(/^text\/(javascript|css); charset=utf-8$/)
    }
  })

  it("inline whatever else is imported: no loader emits a file of its own (a font would need font-src)", () => {
    for (const [ext, loader] of Object.entries(LOADER)) {
      expect(["dataurl", "base64", "text", "binary"], ext).toContain(loader)
      // The CSP allows data: for images only.
      expect(ext).toMatch(/^\.(svg|png|gif|jpe?g|webp)$/)
    }
  })
})

describe("whether dist/console is stale (npm start rebuilds it then)", () => {
  const root = mkdtempSync(join(tmpdir(), "parley-console-stale-"))
  afterAll(() => rmSync(root, { recursive: true, force: true }))
  const at = (p: string, seconds: number) => utimesSync(p, seconds, seconds)

  it("looks at the app's sources, the lockfile (the bundled dependencies) and the build script", () => {
    expect(CONSOLE_INPUTS).toContain(APP_DIR)
    expect(CONSOLE_INPUTS).toContain(join(PROJECT_ROOT, "package-lock.json"))
    expect(CONSOLE_INPUTS).toContain(fileURLToPath(new URL("../../scripts/build-console.mjs", import.meta.url)))
  })

  it("is stale with no build, or when any input (a file, or a file in a directory) is newer", () => {
    const out = join(root, "out")
    const src = join(root, "src")
    mkdirSync(join(src, "pages"), { recursive: true })
    const page = join(src, "pages", "page.tsx")
    const lock = join(root, "package-lock.json")
    const script = join(root, "build.mjs")
    for (const f of [page, lock, script]) writeFileSync(f, "x")
    const inputs = [src, lock, script]
    expect(consoleStale(out, inputs)).toBe(true)

    mkdirSync(out)
    writeFileSync(join(out, "manifest.json"), "{}")
    for (const f of [page, lock, script]) at(f, 1_000)
    at(join(out, "manifest.json"), 2_000)
    expect(consoleStale(out, inputs)).toBe(false)
    // A dependency upgrade (the lockfile), a changed build script, an edited page: each one rebuilds.
    for (const f of [lock, script, page]) {
      at(f, 3_000)
      expect(consoleStale(out, inputs), f).toBe(true)
      at(f, 1_000)
      expect(consoleStale(out, inputs), f).toBe(false)
    }
  })
})
