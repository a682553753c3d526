// The layering of ARCHITECTURE.md as a check (`npm run check`, run by .ci/run): each rule below
// fails the build. Layers, lowest first: machines/ (pure XState), src/platform/ (knows no domain),
// src/providers/ (adapters; know no domain), src/<domain>/ (services and repositories), then
// runtime/ (its host over its rooms, actors/ and workers/) and api/, which only src/main/ wires
// together. Tests (test/, *.test.ts) and benches are exempt. These rules see files:
// scripts/check-folders.mjs, run after them, finds folder cycles.

/** Domains: every src/ folder except the platform, the providers and the start-up wiring. */
const DOMAIN = "^src/(?!platform/|providers/|main/)"
const EXEMPT = "^(test|bench)/|\\.test\\.ts$"

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "machines-only-xstate",
      comment: "machines/ holds pure state machines: they import only xstate and each other.",
      severity: "error",
      from: { path: "^machines/", pathNot: EXEMPT },
      to: { pathNot: ["^machines/", "^node_modules/xstate/"] },
    },
    {
      name: "platform-knows-no-domain",
      comment: "src/platform/ is what every part stands on: no domain, provider, runtime or api import.",
      severity: "error",
      from: { path: "^src/platform/", pathNot: EXEMPT },
      to: { path: ["^src/(?!platform/)", "^runtime/", "^api/"] },
    },
    {
      name: "providers-know-no-domain",
      comment: "src/providers/ are adapters taking plain typed inputs: only src/platform/ and src/providers/.",
      severity: "error",
      from: { path: "^src/providers/", pathNot: EXEMPT },
      to: { path: ["^src/(?!platform/|providers/)", "^runtime/", "^api/", "^machines/"] },
    },
    {
      name: "domains-below-api-and-runtime",
      comment: "A domain never imports api/ or runtime/: only src/main/ wires those together.",
      severity: "error",
      from: { path: DOMAIN, pathNot: EXEMPT },
      to: { path: ["^api/", "^runtime/"] },
    },
    {
      name: "api-reaches-runtime-over-the-bus",
      comment: "api/ never imports runtime/: it sends commands over the bus (src/platform/subjects.ts).",
      severity: "error",
      from: { path: "^api/", pathNot: EXEMPT },
      to: { path: "^runtime/" },
    },
    {
      name: "runtime-host-on-top",
      comment:
        "runtime/'s rooms stand under its host: the actors (runtime/actors/) and the workers (runtime/workers/) " +
        "never import what wires them (runtime/host.ts, runtime/host/).",
      severity: "error",
      from: { path: "^runtime/(actors|workers)/", pathNot: EXEMPT },
      to: { path: "^runtime/host(\\.ts$|/)" },
    },
    {
      name: "runtime-workers-apart",
      comment: "A background worker (runtime/workers/) owns no actor: it imports no other runtime/ room.",
      severity: "error",
      from: { path: "^runtime/workers/", pathNot: EXEMPT },
      to: { path: "^runtime/(?!workers/)" },
    },
    {
      name: "api-never-imports-main",
      comment:
        "api/ never imports the composition root (src/main/): what its handlers require is named in api/services.ts.",
      severity: "error",
      from: { path: "^api/", pathNot: EXEMPT },
      to: { path: "^src/main/" },
    },
    {
      name: "only-runtime-runs-machines",
      comment:
        "Only runtime/ runs machines: elsewhere machines/ and xstate are imported for their types only " +
        "(a domain asks the runtime over the bus or through a port, as src/rehearsals's CampaignMachine).",
      severity: "error",
      from: { pathNot: ["^runtime/", "^machines/", EXEMPT] },
      to: { path: ["^machines/", "^node_modules/xstate/"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "console-app-is-browser-only",
      comment: "The console (console/) runs in the browser: only preact, uplot and its own files.",
      severity: "error",
      from: { path: "^console/" },
      to: { pathNot: ["^console/", "^node_modules/(preact|uplot)/"] },
    },
    {
      name: "nothing-imports-the-console-app",
      comment: "The server serves the console's built files; no server or test code imports its sources.",
      severity: "error",
      from: { pathNot: "^console/" },
      to: { path: "^console/" },
    },
    {
      name: "no-circular",
      comment: "No import cycles, type-only imports included.",
      severity: "error",
      from: { pathNot: EXEMPT },
      to: { circular: true },
    },
    {
      name: "not-to-unresolvable",
      comment: "An import that resolves to nothing is a typo or a missing package.",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^dist/" },
    // Type-only imports count: a layer may not even name another's types.
    tsPreCompilationDeps: true,
    // NodeNext resolution: `./x.js` specifiers resolve to `./x.ts`.
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".tsx", ".js", ".mjs", ".cjs", ".json", ".d.ts"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
}
