// Types of check-folders.mjs, for the test that plants violations (test/architecture/layers.test.ts).
export interface CruisedModule {
  readonly source: string
  readonly dependencies: ReadonlyArray<{ readonly resolved: string }>
}
export interface FolderCycle {
  readonly folders: readonly string[]
  readonly steps: ReadonlyArray<{ readonly from: string; readonly to: string; readonly via: string }>
}
export function folderOf(path: string): string | null
export function folderGraph(modules: readonly CruisedModule[]): Map<string, Map<string, string>>
export function folderCycles(modules: readonly CruisedModule[]): FolderCycle[]
export function describeCycles(cycles: readonly FolderCycle[]): string
