// When the console's browser suites run, skip or fail: with Chromium they run; without it a dev
// machine's `npm test` skips them and says why, and CI (REQUIRE_BROWSER=1, exported by .ci/run)
// fails them, so a moved or missing browser can never leave CI green with no browser coverage.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { PROJECT_ROOT } from "../../src/platform/paths.js"
import { browserGate, CHROMIUM } from "./browser.support.js"

describe("the browser suites' gate", () => {
  it("runs them when Chromium is there, required or not", () => {
    expect(browserGate({}, true)).toEqual({ run: true })
    expect(browserGate({ REQUIRE_BROWSER: "1" }, true)).toEqual({ run: true })
  })

  it("skips them without Chromium on a plain run, saying why", () => {
    for (const env of [{}, { REQUIRE_BROWSER: "0" }, { REQUIRE_BROWSER: "" }]) {
      const gate = browserGate(env, false)
      expect(gate.run).toBe(false)
      expect(gate.message).toContain(`${CHROMIUM} is missing`)
      expect(gate.message).toContain("skipped")
    }
  })

  it("fails them without Chromium when REQUIRE_BROWSER=1: they run, and launching says why", () => {
    const gate = browserGate({ REQUIRE_BROWSER: "1" }, false)
    expect(gate.run).toBe(true)
    expect(gate.message).toMatch(/^REQUIRE_BROWSER=1 but \/usr\/bin\/chromium is missing/)
  })

  it("is required by CI for every test run", () => {
    const ci = readFileSync(join(PROJECT_ROOT, ".ci", "run"), "utf8")
    const exported = ci.indexOf("export REQUIRE_BROWSER=1")
    expect(exported).toBeGreaterThan(0)
    // Before the first test run (a line that runs it, not a comment), so every run inherits it.
    const firstRun = ci.search(/^[^#\n]*npm (test|run test:system)/m)
    expect(firstRun).toBeGreaterThan(0)
    expect(exported).toBeLessThan(firstRun)
  })
})
