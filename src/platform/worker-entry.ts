// Where a worker thread's entry module is: `<name>.worker.js` beside its module in the build, the
// `.ts` when that module runs from source (tsx, vitest). Node 20 applies neither `--import tsx` in a
// worker's execArgv nor the parent's loader hooks to a worker's entry module, so from source the
// worker starts as a small script that registers tsx's ESM hooks in its own thread and then imports
// the .ts entry. tsx is a devDependency: only this source path needs it.
import type { WorkerOptions } from "node:worker_threads"

/** The entry of the worker `<name>.worker` beside the module at `here` (its import.meta.url). */
export function workerEntry(
  here: string,
  name: string,
): { readonly target: string | URL; readonly options: WorkerOptions } {
  if (!here.endsWith(".ts")) return { target: new URL(`./${name}.worker.js`, here), options: {} }
  const entry = new URL(`./${name}.worker.ts`, here)
  let tsxApi: string
  try {
    tsxApi = import.meta.resolve("tsx/esm/api")
  } catch {
    // Let the worker fail to load: its work rejects, naming the file.
    return { target: entry, options: {} }
  }
  const register = `import(${JSON.stringify(tsxApi)}).then((m) => m.register())`
  const code = `${register}.then(() => import(${JSON.stringify(entry.href)}))`
  return { target: code, options: { eval: true } }
}
