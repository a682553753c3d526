// Types of build-console.mjs, for the tests that build and measure the console.
export interface BuiltFile {
  readonly name: string
  readonly type: string
  readonly body: Uint8Array
}
export interface ManifestAsset {
  readonly name: string
  readonly type: string
  readonly bytes: number
  readonly sha256: string
}
export const APP_DIR: string
export const OUT_DIR: string
export const LOADER: Readonly<Record<string, string>>
export const CONSOLE_INPUTS: readonly string[]
export function bundleConsole(): Promise<{ files: BuiltFile[]; html: string }>
export function newestSource(dir?: string): number
export function newestOf(paths: readonly string[]): number
export function consoleStale(outDir?: string, inputs?: readonly string[]): boolean
export function writeConsole(outDir?: string): Promise<ManifestAsset[]>
