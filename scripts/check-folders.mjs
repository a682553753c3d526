// Fails when folders import each other in a circle: dependency-cruiser's rules see files, so a
// cycle between folders made of acyclic file imports passes them. Run after depcruise by
// `npm run check:layers`: reads its JSON (stdin, or a file named as the argument), collapses each
// module to its folder (src/<domain>, src/providers, src/platform, src/main, api, runtime,
// machines), and names every cycle between folders with one import that makes each step.
// Type-only imports count, as in .dependency-cruiser.cjs; tests and benches are exempt.
import { readFileSync } from "node:fs"
import { pathToFileURL } from "node:url"

const EXEMPT = /^(test|bench)\/|\.test\.ts$/

/** The folder a module belongs to, or null for what the check ignores (packages, tests). */
export function folderOf(path) {
  if (EXEMPT.test(path) || path.startsWith("node_modules/")) return null
  const src = /^src\/([^/]+)\//.exec(path)
  if (src) return `src/${src[1]}`
  const top = /^(api|runtime|machines)\//.exec(path)
  return top ? top[1] : null
}

/**
 * The folder graph of a cruise result's modules: for each pair of folders, one file import that
 * links them (the first met), so a report can say where a cycle comes from.
 */
export function folderGraph(modules) {
  const edges = new Map()
  for (const m of modules) {
    const from = folderOf(m.source)
    if (from === null) continue
    for (const d of m.dependencies) {
      const to = folderOf(d.resolved)
      if (to === null || to === from) continue
      if (!edges.has(from)) edges.set(from, new Map())
      const out = edges.get(from)
      if (!out.has(to)) out.set(to, `${m.source} → ${d.resolved}`)
    }
  }
  return edges
}

/** At most this many cycles are listed (a knot of many folders has more circles than anyone reads). */
const MAX_CYCLES = 200

/**
 * Every elementary cycle between folders, each starting at its smallest folder (so each is listed
 * once), with the import that makes each step.
 */
export function folderCycles(modules) {
  const edges = folderGraph(modules)
  const next = (f) => [...(edges.get(f)?.keys() ?? [])].sort()
  const cycles = []
  for (const start of [...edges.keys()].sort()) {
    // Paths from start through folders after it in order, back to start.
    const walk = (path) => {
      for (const w of next(path.at(-1))) {
        if (cycles.length >= MAX_CYCLES) return
        if (w === start) cycles.push([...path])
        else if (w > start && !path.includes(w)) walk([...path, w])
      }
    }
    walk([start])
  }
  return cycles.map((circle) => ({
    folders: circle,
    steps: circle.map((from, i) => {
      const to = circle[(i + 1) % circle.length]
      return { from, to, via: edges.get(from).get(to) }
    }),
  }))
}

/** The report of the cycles, one paragraph each; empty when there are none. */
export function describeCycles(cycles) {
  return cycles
    .map((c) => {
      const head = `folder cycle: ${[...c.folders, c.folders[0]].join(" → ")}`
      return `${head}\n${c.steps.map((s) => `  ${s.from} → ${s.to}: ${s.via}`).join("\n")}`
    })
    .join("\n")
}

const main = async () => {
  const text = process.argv[2] === undefined ? readFileSync(0, "utf8") : readFileSync(process.argv[2], "utf8")
  const result = JSON.parse(text)
  // depcruise's own rule violations, as its err reporter prints them (the JSON run replaces the text one).
  const { format } = await import("dependency-cruiser")
  const rules = await format(result, { outputType: "err" })
  process.stdout.write(rules.output)
  const cycles = folderCycles(result.modules)
  const folders = new Set(result.modules.map((m) => folderOf(m.source)).filter((f) => f !== null))
  if (cycles.length > 0) {
    const more = cycles.length >= MAX_CYCLES ? ` (listing stopped at ${MAX_CYCLES})` : ""
    process.stderr.write(`${describeCycles(cycles)}\n${cycles.length} folder cycles${more}\n`)
  } else process.stdout.write(`no folder cycle between the ${folders.size} folders\n`)
  process.exit(rules.exitCode > 0 || cycles.length > 0 ? 1 : 0)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
