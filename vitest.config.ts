import { defineConfig } from "vitest/config"

// Suites boot real servers and databases: run files in separate forks, two at a time (2 cores).
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "machines/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ["test/support/global-setup.ts"],
  },
})
