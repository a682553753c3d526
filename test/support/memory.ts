// A process's resident memory as tests measure it (Linux /proc): all of it, or all but its
// WebAssembly memories, which the embedded database (PGlite) grows in steps of its own.
import { readFileSync } from "node:fs"

/** Resident memory of a process, in bytes. */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return Number(m![1]) * 1024
}

/** Resident memory of a process outside its WebAssembly memories, in bytes. */
export function rssOutsideWasmOf(pid: number): number {
  return rssOutsideWasm(readFileSync(`/proc/${pid}/smaps`, "utf8"))
}

const GUARD_BYTES = 1024n ** 3n

/**
 * The resident bytes of an smaps listing less those of WebAssembly memories. V8 reserves each
 * wasm memory with guard regions of gigabytes (inaccessible anonymous mappings, `---p`) on both
 * sides of the part in use, so a readable-writable anonymous mapping between two inaccessible ones
 * of at least 1 GiB each is wasm memory; nothing else in a Node process reserves that much.
 */
export function rssOutsideWasm(smaps: string): number {
  interface Area {
    start: bigint
    end: bigint
    perms: string
    anonymous: boolean
    rss: number
  }
  const areas: Area[] = []
  for (const line of smaps.split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head) {
      areas.push({
        start: BigInt(`0x${head[1]}`),
        end: BigInt(`0x${head[2]}`),
        perms: head[3]!,
        anonymous: head[4]!.trim() === "",
        rss: 0,
      })
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss && areas.length > 0) areas[areas.length - 1]!.rss = Number(rss[1]) * 1024
  }
  /** An inaccessible anonymous mapping of at least 1 GiB: a wasm memory's guard region. */
  const isGuard = (a: Area | undefined) =>
    a?.anonymous === true && a.perms.startsWith("---") && a.end - a.start >= GUARD_BYTES
  let total = 0
  areas.forEach((a, i) => {
    const before = areas[i - 1]
    const after = areas[i + 1]
    const wasm =
      a.anonymous &&
      a.perms.startsWith("rw") &&
      isGuard(before) &&
      before?.end === a.start &&
      isGuard(after) &&
      after?.start === a.end
    if (!wasm) total += a.rss
  })
  return total
}
