// The layering check fails when it should: a tree planted with a folder cycle (made of file imports
// that are no cycle), an api file importing the composition root, a domain running a machine and
// runtime rooms importing the host and each other is cruised with the project's own rules
// (.dependency-cruiser.cjs) and folder check (scripts/check-folders.mjs), and each names its
// violation; the project's tree passes both.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { cruise, type IConfiguration, type ICruiseResult } from "dependency-cruiser"
import extractDepcruiseConfig from "dependency-cruiser/config-utl/extract-depcruise-config"
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { folderCycles } from "../../scripts/check-folders.mjs"
import { PROJECT_ROOT } from "../../src/platform/paths.js"

const ROOTS = ["src", "api", "runtime", "machines", "console"]

/** A few files, each a line or two: what the rules must catch, and what they must let through. */
const PLANTED: Readonly<Record<string, string>> = {
  // src/a → src/b (one → two) and src/b → src/a (three → four): no file cycle, a folder cycle.
  "src/a/one.ts": 'import { two } from "../b/two.js"\nexport const one = () => two\n',
  "src/b/two.ts": "export const two = 2\n",
  "src/b/three.ts": 'import { four } from "../a/four.js"\nexport const three = four\n',
  "src/a/four.ts": "export const four = 4\n",
  // api names the app's services through the composition root.
  "src/main/app.layer.ts": "export type AppServices = never\n",
  "api/route.ts": 'import type { AppServices } from "../src/main/app.layer.js"\nexport type Needs = AppServices\n',
  // A domain runs a machine; another only names its state (allowed); the runtime runs it (allowed).
  "machines/thing.machine.ts":
    'import { setup } from "xstate"\nexport type ThingState = "idle"\n' +
    'export const thingMachine = setup({}).createMachine({ initial: "idle", states: { idle: {} } })\n',
  "src/c/runner.ts":
    'import { createActor } from "xstate"\nimport { thingMachine } from "../../machines/thing.machine.js"\n' +
    "export const run = () => createActor(thingMachine).start()\n",
  "src/c/view.ts":
    'import type { ThingState } from "../../machines/thing.machine.js"\nexport const s: ThingState = "idle"\n',
  "runtime/host.ts":
    'import { createActor } from "xstate"\nimport { thingMachine } from "../machines/thing.machine.js"\n' +
    "export const host = () => createActor(thingMachine).start()\n",
  // The console, one of the roots cruised, with nothing to find.
  "console/main.tsx": "export const main = () => null\n",
  // An actor reaches up to the host that wires it; a worker reaches into the actors.
  "runtime/actors/driver.ts": 'import { host } from "../host.js"\nexport const driver = host\n',
  "runtime/workers/worker.ts": 'import { driver } from "../actors/driver.js"\nexport const worker = driver\n',
  // Enough of xstate to resolve, and of the project's tsconfig to read.
  "node_modules/xstate/package.json": '{ "name": "xstate", "type": "module", "exports": { ".": "./index.js" } }\n',
  "node_modules/xstate/index.js": "export const setup = () => ({})\nexport const createActor = () => ({})\n",
  "tsconfig.json": '{ "compilerOptions": { "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true } }\n',
}

let ruleSet: IConfiguration
const cruiseTree = async (dir: string): Promise<ICruiseResult> => {
  const { output } = await cruise(
    ROOTS,
    { validate: true, ruleSet, ...ruleSet.options, baseDir: dir },
    {},
    { tsConfig: extractTSConfig(join(dir, "tsconfig.json")) },
  )
  return output as ICruiseResult
}
const violationsOf = (r: ICruiseResult) =>
  r.summary.violations.map((v) => ({ rule: v.rule.name, from: v.from, to: v.to }))

const planted = mkdtempSync(join(tmpdir(), "parley-layers-"))
afterAll(() => rmSync(planted, { recursive: true, force: true }))

beforeAll(async () => {
  ruleSet = await extractDepcruiseConfig(join(PROJECT_ROOT, ".dependency-cruiser.cjs"))
  for (const [path, text] of Object.entries(PLANTED)) {
    mkdirSync(dirname(join(planted, path)), { recursive: true })
    writeFileSync(join(planted, path), text)
  }
})

describe("the layering check", () => {
  it("names a planted folder cycle, api importing src/main, a domain running a machine, crossed rooms", async () => {
    const result = await cruiseTree(planted)
    expect(violationsOf(result)).toEqual(
      expect.arrayContaining([
        { rule: "api-never-imports-main", from: "api/route.ts", to: "src/main/app.layer.ts" },
        { rule: "only-runtime-runs-machines", from: "src/c/runner.ts", to: "machines/thing.machine.ts" },
        { rule: "only-runtime-runs-machines", from: "src/c/runner.ts", to: "node_modules/xstate/index.js" },
        { rule: "runtime-host-on-top", from: "runtime/actors/driver.ts", to: "runtime/host.ts" },
        { rule: "runtime-workers-apart", from: "runtime/workers/worker.ts", to: "runtime/actors/driver.ts" },
      ]),
    )
    // Only those: a type-only import of a machine and the runtime running it are allowed, and the
    // folder cycle is no file cycle, so depcruise's own rules do not see it...
    expect(violationsOf(result)).toHaveLength(5)
    // ...and the folder check does, naming the imports that make it.
    expect(folderCycles(result.modules)).toEqual([
      {
        folders: ["src/a", "src/b"],
        steps: [
          { from: "src/a", to: "src/b", via: "src/a/one.ts → src/b/two.ts" },
          { from: "src/b", to: "src/a", via: "src/b/three.ts → src/a/four.ts" },
        ],
      },
    ])
  })

  it("passes the project's own tree", async () => {
    const result = await cruiseTree(PROJECT_ROOT)
    expect(violationsOf(result)).toEqual([])
    expect(folderCycles(result.modules)).toEqual([])
  }, 60_000)
})
