import { defineConfig } from "vitest/config"

// Two projects. "unit" is `npm test`: every suite that runs in one process against servers it
// boots in that process. Its files share each worker's module cache (isolate: false), so the
// stack is imported once per worker rather than once per file; what must not leak between servers
// in one process is kept per database (src/platform/per-database.ts) or per server.
// "system" is `npm run test:system`: suites that start several processes or a command as a
// process, drive Chromium, migrate a database from empty, or load a run of 100,000 targets, each
// file in a fresh worker. CI runs both (.ci/run).
const SYSTEM = [
  // several processes on one database and bus: takeover, hand-over, nginx in front, faults
  "test/integration/**/*.test.ts",
  // the console in Chromium
  "test/console/browser.test.ts",
  "test/console/*.browser.test.ts",
  // a server or a command as its own process: start-up refusals, signals, crashes, raw sockets,
  // fuzzing, the CLI's commands
  "test/**/*.process.test.ts",
  // an empty database migrated to an older version, then upgraded
  "test/**/*.migration.test.ts",
  "test/http/lifecycle.test.ts",
  "test/http/process-faults.test.ts",
  "test/http/fuzz.test.ts",
  "test/http/body-before-auth.test.ts",
  // a run of 100,000 targets streamed as CSV
  "test/results/export-stream.test.ts",
]

export default defineConfig({
  test: {
    pool: "forks",
    // Suites boot real servers and databases: two workers on this 2-core machine.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ["test/support/global-setup.ts"],
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts", "machines/**/*.test.ts"],
          exclude: SYSTEM,
          isolate: false,
        },
      },
      { extends: true, test: { name: "system", include: SYSTEM } },
    ],
  },
})
