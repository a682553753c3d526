// What the console's browser suite needs around playwright-core: Debian's Chromium (never a
// downloaded browser), launched headless with a fresh profile; screenshots (into
// test/console/screenshots/ with UPDATE_SCREENSHOTS=1, else a scratch directory); and a record of
// every page error and CSP violation, which the suite asserts is empty.
import { existsSync, mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Browser, chromium, type Locator, type Page } from "playwright-core"
import { PROJECT_ROOT } from "../../src/platform/paths.js"

export const CHROMIUM = "/usr/bin/chromium"

/**
 * Whether a browser suite runs: with Chromium, yes; without it, a dev machine's `npm test` skips
 * and says why, but with REQUIRE_BROWSER=1 (set by .ci/run) the suite fails, so CI can never pass
 * with no browser coverage.
 */
export function browserGate(
  env: Readonly<Record<string, string | undefined>>,
  chromiumThere: boolean,
): { readonly run: boolean; readonly message?: string } {
  if (chromiumThere) return { run: true }
  if (env["REQUIRE_BROWSER"] === "1")
    return {
      run: true,
      message:
        `REQUIRE_BROWSER=1 but ${CHROMIUM} is missing: the console's browser suites cannot run ` +
        "(apt-get install chromium; .ci/run installs it)",
    }
  return {
    run: false,
    message: `console browser suite skipped: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`,
  }
}

const gate = browserGate(process.env, existsSync(CHROMIUM))
if (!gate.run) console.warn(gate.message)
/** Skip the suite (no Chromium, not required); when it is required and missing, launching fails. */
export const skipBrowser = !gate.run

/** First thing in a browser suite's beforeAll: fails it, in words, when Chromium is required and missing. */
export function assertBrowser(): void {
  if (gate.message !== undefined) throw new Error(gate.message)
}

/**
 * Where the pictures go: the README's own (test/console/screenshots/) only when asked with
 * UPDATE_SCREENSHOTS=1, so an ordinary test run leaves the tree as it found it.
 */
export const SCREENSHOTS =
  process.env.UPDATE_SCREENSHOTS === "1"
    ? join(PROJECT_ROOT, "test", "console", "screenshots")
    : join(tmpdir(), "parley-console-screenshots")

/**
 * Headless Chromium with nothing running in the background: no QUIC, sync, component updates or
 * first-run work, so the only traffic is the console's own. Playwright gives each launch a fresh,
 * temporary user-data directory, removed when the browser closes.
 */
export async function launchChromium(): Promise<Browser> {
  assertBrowser()
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  })
}

/**
 * Writes <SCREENSHOTS>/<name>.png (the README shows them). `hide`: parts painted over in the
 * picture (a secret the page shows once must not end up in the repository).
 */
export async function screenshot(page: Page, name: string, hide: Locator[] = []): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true })
  // Let the fonts settle and the caret stop blinking so reruns write the same picture.
  await page.evaluate("document.fonts.ready.then(() => true)")
  await page.screenshot({
    path: join(SCREENSHOTS, `${name}.png`),
    animations: "disabled",
    caret: "hide",
    mask: hide,
    maskColor: "#c8ccd4",
  })
}

/**
 * Everything the page complained about: uncaught errors, console errors (a CSP violation is one)
 * and failed same-origin requests answered 5xx. The suite expects none.
 */
export function watchProblems(page: Page, origin: string): string[] {
  const problems: string[] = []
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`))
  page.on("console", (m) => {
    if (m.type() !== "error") return
    const text = m.text()
    // A refused request (a 4xx the page handles and shows in words) is logged by Chromium as
    // "Failed to load resource"; those are the point of some steps, not problems.
    if (/Failed to load resource: the server responded with a status of 4\d\d/.test(text)) return
    problems.push(`console error: ${text}`)
  })
  page.on("response", (r) => {
    if (r.url().startsWith(origin) && r.status() >= 500) problems.push(`${r.status()} from ${r.url()}`)
  })
  return problems
}

/**
 * Polls `read` (the database, the API) until `check` holds: the page has answered, but the write
 * behind it may trail by a tick. Fails with the last value read after `ms`.
 */
export async function eventually<T>(read: () => Promise<T>, check: (v: T) => boolean, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await read()
    if (check(v)) return v
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms: ${JSON.stringify(v)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}
