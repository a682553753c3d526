// The console's bundle budget (150 KB gzipped, script and CSS together) and the build's output:
// hashed names that change with the content, a manifest that matches the files, index.html naming them.
import { createHash } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { gzipSync } from "node:zlib"
import { afterAll, describe, expect, it } from "vitest"
import { bundleConsole, writeConsole } from "../../scripts/build-console.mjs"

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
