// The pure machines the runtime hosts, and the version stored beside each persisted snapshot.
// Bump a machine's version when a persisted snapshot of the old shape could no longer be restored.

export * from "./approval.machine.js"
export * from "./call.machine.js"
export * from "./run.machine.js"

export const MACHINE_VERSIONS = {
  run: 1,
  approval: 1,
} as const satisfies Record<string, number>

export type MachineName = keyof typeof MACHINE_VERSIONS
