// The long tasks of a V8 CPU profile (a .cpuprofile, as BENCH_RAMP_PROFILE writes): consecutive samples
// that are not idle and sit under the same entry frame (a timers phase, the immediates, one socket's
// data; a collection counts in the task it interrupted), longer than a threshold, each with the
// functions that took its time (self time, and the project's own frames under which it was spent).
//
//   node --import tsx bench/long-tasks.ts FILE.cpuprofile [MIN_MS=10]
import { readFileSync } from "node:fs"

interface Frame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: Frame
  readonly children?: number[]
}
interface Profile {
  readonly nodes: ProfileNode[]
  readonly startTime: number
  readonly samples: number[]
  readonly timeDeltas: number[]
}

const [file, minArg] = process.argv.slice(2)
if (file === undefined) {
  process.stderr.write("usage: node --import tsx bench/long-tasks.ts FILE.cpuprofile [MIN_MS]\n")
  process.exit(2)
}
const minMs = Number(minArg ?? 10)
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const parent = new Map<number, number>()
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

const IDLE = new Set(["(idle)", "(program)"])
const GC = "(garbage collector)"
/** The frame right under the root: the macrotask the sample is in (timers, immediates, a socket's data). */
function entryOf(id: number): number {
  let n = id
  for (let p = parent.get(n); p !== undefined && parent.get(p) !== undefined; p = parent.get(n)) n = p
  return n
}
const shortUrl = (url: string) => url.replace(/^.*\/(src|api|runtime|machines|node_modules)\//, "$1/")
const name = (f: Frame) => `${f.functionName || "(anonymous)"} ${shortUrl(f.url)}:${f.lineNumber + 1}`
/** The innermost frame of the project's own code on the sample's stack (not node_modules, not node:). */
function ownFrame(id: number): string {
  for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
    const f = byId.get(n)!.callFrame
    if (/\/(src|api|runtime|machines)\//.test(f.url) && !f.url.includes("node_modules")) return name(f)
  }
  return "(no project frame)"
}

interface Stretch {
  startMs: number
  ms: number
  /** The profile node of the task's entry frame. */
  entry: number
  self: Map<string, number>
  own: Map<string, number>
}
const stretches: Stretch[] = []
let t = profile.startTime
let current: Stretch | undefined
const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v)
for (let i = 0; i < profile.samples.length; i++) {
  const delta = profile.timeDeltas[i] ?? 0
  t += delta
  const node = byId.get(profile.samples[i]!)!
  // A collection belongs to the task it interrupted; a sample in another task starts a stretch.
  const entry = node.callFrame.functionName === GC ? current?.entry : entryOf(node.id)
  if (IDLE.has(node.callFrame.functionName) || (current !== undefined && entry !== current.entry)) {
    if (current !== undefined && current.ms >= minMs) stretches.push(current)
    current = undefined
    if (IDLE.has(node.callFrame.functionName)) continue
  }
  current ??= {
    startMs: (t - profile.startTime) / 1000,
    ms: 0,
    entry: entry ?? node.id,
    self: new Map(),
    own: new Map(),
  }
  const ms = (profile.timeDeltas[i + 1] ?? delta) / 1000
  current.ms += ms
  add(current.self, name(node.callFrame), ms)
  add(current.own, ownFrame(node.id), ms)
}
if (current !== undefined && current.ms >= minMs) stretches.push(current)

const top = (m: Map<string, number>, n: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${v.toFixed(1)} ms ${k}`)
process.stdout.write(`${stretches.length} stretches of ${minMs} ms or more\n`)
// Across all the long stretches: where their time went.
const allOwn = new Map<string, number>()
const allSelf = new Map<string, number>()
for (const s of stretches) {
  for (const [k, v] of s.own) add(allOwn, k, v)
  for (const [k, v] of s.self) add(allSelf, k, v)
}
process.stdout.write(`\nin all of them, by project frame:\n  ${top(allOwn, 25).join("\n  ")}\n`)
process.stdout.write(`\nin all of them, by self time:\n  ${top(allSelf, 25).join("\n  ")}\n`)
process.stdout.write("\nthe longest:\n")
for (const s of [...stretches].sort((a, b) => b.ms - a.ms).slice(0, 12))
  process.stdout.write(
    `  at ${(s.startMs / 1000).toFixed(2)} s, ${s.ms.toFixed(1)} ms in ${name(byId.get(s.entry)!.callFrame)}\n` +
      `    own: ${top(s.own, 4).join("; ")}\n` +
      `    self: ${top(s.self, 4).join("; ")}\n`,
  )
