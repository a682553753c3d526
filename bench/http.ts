// bench/http: requests/s and latency of GET /pricing through the full stack (routing, Effect
// runtime, error mapping, request id, one pino line per request) against a bare uWS server
// answering the same bytes. Both run as their own processes; rounds alternate so the machine's
// noise falls on both alike, and the ratio is what we report.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { cpuMicros, type LoadResult, load, machine, record, startProcess } from "./lib.js"

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const CONNECTIONS = 64

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export async function benchHttp(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bench-"))
  const full = await startProcess(["dist/src/main/main.js", "serve", "--role", "all"], {
    HOST: "127.0.0.1",
    PORT: "0",
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
  })
  const bare = await startProcess(["--import", "tsx", "bench/servers/bare-uws.ts"], { PORT: "0" })
  const results: Record<"bare" | "full", Array<LoadResult & { cpuPerReq: number }>> = { bare: [], full: [] }
  try {
    for (const p of [bare, full])
      await load(`http://127.0.0.1:${p.port}/pricing`, { connections: CONNECTIONS, seconds: 2 }) // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, p] of (round % 2 === 0
        ? [
            ["bare", bare],
            ["full", full],
          ]
        : [
            ["full", full],
            ["bare", bare],
          ]) as Array<["bare" | "full", typeof bare]>) {
        const cpu0 = cpuMicros(p.child.pid!)
        const r = await load(`http://127.0.0.1:${p.port}/pricing`, { connections: CONNECTIONS, seconds: SECONDS })
        const cpuPerReq = (cpuMicros(p.child.pid!) - cpu0) / r.requests
        if (r.errors > 0 || r.non2xx > 0) throw new Error(`${name}: ${r.errors} errors, ${r.non2xx} non-2xx`)
        results[name].push({ ...r, cpuPerReq })
        process.stdout.write(
          `round ${round + 1} ${name}: ${Math.round(r.rps)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ` +
            `${cpuPerReq.toFixed(1)} µs CPU/req\n`,
        )
      }
    }
  } finally {
    await Promise.all([full.stop(), bare.stop()])
    rmSync(dataDir, { recursive: true, force: true })
  }
  const summary = (rs: Array<LoadResult & { cpuPerReq: number }>) => ({
    rps: median(rs.map((r) => r.rps)),
    p50: median(rs.map((r) => r.p50)),
    p99: median(rs.map((r) => r.p99)),
    cpu: median(rs.map((r) => r.cpuPerReq)),
  })
  const b = summary(results.bare)
  const f = summary(results.full)
  const ratio = f.rps / b.rps
  const md =
    `## http — GET /pricing, full stack vs bare uWebSockets.js\n\n` +
    `Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; ${ROUNDS} alternating rounds of ` +
    `${SECONDS} s, ${CONNECTIONS} keep-alive connections (autocannon in the bench process, each server in its ` +
    `own process; the two share 2 cores). Medians.\n\n` +
    `| server | req/s | p50 ms | p99 ms | server CPU µs/request |\n` +
    `|---|---:|---:|---:|---:|\n` +
    `| bare uWS, same bytes | ${Math.round(b.rps)} | ${b.p50} | ${b.p99} | ${b.cpu.toFixed(1)} |\n` +
    `| Parley full stack (LOG_LEVEL=info) | ${Math.round(f.rps)} | ${f.p50} | ${f.p99} | ${f.cpu.toFixed(1)} |` +
    `\n\n**Full stack / bare: ${(ratio * 100).toFixed(0)}% of the throughput** (${ratio.toFixed(2)}×); ` +
    `**${(f.cpu / b.cpu).toFixed(1)}× the server CPU per request**.\n` +
    `Throughput swings by a third between rounds on this shared machine, and autocannon shares the two cores\n` +
    `with the server, so the CPU-per-request ratio is the steadier figure.`
  process.stdout.write(`\n${md}\n`)
  record("http", md)
}
