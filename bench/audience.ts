// bench/audience: rows/s of POST /api/workflows/{id}/audience with a 100,000-row CSV streamed as
// multipart (server in its own process), against csv-parse alone on the same file, with the
// server's peak memory to show the attach does not hold the file.
import { randomBytes } from "node:crypto"
import {
  appendFileSync,
  createReadStream,
  mkdtempSync,
  openAsBlob,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { parse } from "csv-parse"
import { parseAudienceCsv } from "../src/audience/audience.parse.js"
import { CSV_OPTIONS } from "../src/phones/csv.js"
import { connectPostgres, redact, withDatabase } from "../src/platform/Db.js"
import { machine, record, startProcess } from "./lib.js"

const ROWS = Number(process.env.BENCH_AUDIENCE_ROWS ?? 100_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
/** The memory check's second file is this many times larger. */
const SCALE = Number(process.env.BENCH_AUDIENCE_SCALE ?? 3)

interface Expected {
  readonly rows: number
  readonly invalid: number
  readonly duplicates: number
  readonly unique: number
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const mib = (kib: number) => `${(kib / 1024).toFixed(0)} MiB`

/**
 * An audience file as spreadsheets export them: a header, five columns, names quoted because
 * they hold commas (some with escaped quotes), notes that span lines, 2% invalid numbers, 3%
 * repeats of an earlier number written another way, extra unnamed columns now and then, and a
 * few blank lines. Numbers are distinct valid US numbers (415-2xx-xxxx).
 */
function generate(path: string, rows: number): Expected {
  // Written 10,000 lines at a time: the bench's own memory is reported too.
  writeFileSync(path, "phone,name,email,city,notes\n")
  let out: string[] = []
  let invalid = 0
  let duplicates = 0
  let unique = 0
  for (let i = 0; i < rows; i++) {
    let phone: string
    if (i % 50 === 7) {
      phone = `555-01${i % 10}`
      invalid++
    } else if (i % 33 === 5 && unique > 0) {
      const earlier = 2_000_000 + ((i * 7919) % unique)
      phone = `(415) ${String(earlier).slice(0, 3)}-${String(earlier).slice(3)}`
      duplicates++
    } else {
      phone = i % 2 === 0 ? `+1415${2_000_000 + unique}` : `415-${2_000_000 + unique}`.replace(/^(415-\d{3})/, "$1-")
      unique++
    }
    const name = i % 10 === 0 ? `"Doe, ""Jay"" ${i}"` : `"Person, ${i}"`
    const notes = i % 25 === 0 ? `"called twice,\nleft a message"` : i % 3 === 0 ? "vip" : ""
    const extra = i % 40 === 0 ? `,extra ${i},more` : ""
    out.push(`${phone},${name},user${i}@example.com,City ${i % 97},${notes}${extra}`)
    if (i % 10_000 === 9_999) {
      out.push("")
      appendFileSync(path, `${out.join("\n")}\n`)
      out = []
    }
  }
  appendFileSync(path, out.length > 0 ? `${out.join("\n")}\n` : "")
  return { rows, invalid, duplicates, unique }
}

/** VmHWM (peak resident set) and VmRSS of a process, in KiB. */
function memory(pid: number | "self"): { hwm: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN)
  return { hwm: field("VmHWM"), rss: field("VmRSS") }
}

async function csvParseAlone(path: string): Promise<number> {
  const t0 = performance.now()
  let records = 0
  for await (const _ of createReadStream(path).pipe(parse(CSV_OPTIONS))) records++
  const seconds = (performance.now() - t0) / 1000
  if (records !== ROWS + 1) throw new Error(`csv-parse read ${records} records, expected ${ROWS + 1}`)
  return ROWS / seconds
}

/** src/audience/audience.parse.ts without the database: csv-parse + header roles + E.164 normalisation. */
async function parseAndNormalise(path: string, expected: Expected): Promise<number> {
  const t0 = performance.now()
  let valid = 0
  const tally = await parseAudienceCsv(createReadStream(path), "US", {
    batchSize: 1000,
    onBatch: async (rows) => void (valid += rows.length),
  })
  const seconds = (performance.now() - t0) / 1000
  if (tally.rows !== ROWS || tally.invalid !== expected.invalid)
    throw new Error(
      `parser tally ${JSON.stringify({ rows: tally.rows, invalid: tally.invalid })}, expected ` +
        `${JSON.stringify(expected)}`,
    )
  return ROWS / seconds
}

async function call(
  base: string,
  method: string,
  path: string,
  opts: { body?: unknown; bearer?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = {}
  if (opts.body !== undefined) headers["content-type"] = "application/json"
  if (opts.bearer !== undefined) headers["authorization"] = `Bearer ${opts.bearer}`
  const res = await fetch(base + path, {
    method,
    headers,
    ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
  })
  const text = await res.text()
  return { status: res.status, body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>) }
}

function expectStatus(what: string, got: { status: number; body: unknown }, want: number): void {
  if (got.status !== want) throw new Error(`${what}: expected ${want}, got ${got.status} ${JSON.stringify(got.body)}`)
}

interface Upload {
  readonly seconds: number
  readonly rps: number
  readonly counts: Record<string, unknown>
  /** The server's RSS just before the upload and its highest sample during it. */
  readonly rssBeforeKiB: number
  readonly peakRssKiB: number
}

/** Uploads the file (streamed from disk by a file-backed Blob) and samples the server's RSS meanwhile. */
async function upload(
  base: string,
  token: string,
  workflowId: number,
  path: string,
  pid: number,
  expected: Expected,
): Promise<Upload> {
  const form = new FormData()
  form.set("file", await openAsBlob(path, { type: "text/csv" }), "audience.csv")
  const rssBefore = memory(pid).rss
  let peak = rssBefore
  const sampler = setInterval(() => (peak = Math.max(peak, memory(pid).rss)), 50)
  const t0 = performance.now()
  try {
    const res = await fetch(`${base}/api/workflows/${workflowId}/audience`, {
      method: "POST",
      body: form,
      headers: { authorization: `Bearer ${token}` },
    })
    const counts = (await res.json()) as Record<string, unknown>
    const seconds = (performance.now() - t0) / 1000
    if (res.status !== 200) throw new Error(`upload: ${res.status} ${JSON.stringify(counts)}`)
    const want = {
      accepted: expected.unique,
      rejected_invalid: expected.invalid,
      duplicates: expected.duplicates,
      total_targets: expected.unique,
    }
    for (const [k, v] of Object.entries(want))
      if (counts[k] !== v)
        throw new Error(
          `upload counted ${k}=${String(counts[k])}, expected ${v}: ` +
            `${JSON.stringify({ ...counts, invalid_rows: undefined })}`,
        )
    return {
      seconds,
      rps: expected.rows / seconds,
      counts,
      rssBeforeKiB: rssBefore,
      peakRssKiB: Math.max(peak, memory(pid).rss),
    }
  } finally {
    clearInterval(sampler)
  }
}

export async function benchAudience(): Promise<void> {
  const loadBefore = loadavg()[0]!
  const dir = mkdtempSync(join(tmpdir(), "parley-bench-audience-"))
  const file = join(dir, "audience.csv")
  const expected = generate(file, ROWS)
  const bytes = statSync(file).size
  process.stdout.write(
    `${ROWS} rows, ${(bytes / 2 ** 20).toFixed(1)} MiB: ${expected.unique} distinct valid numbers, ` +
      `${expected.invalid} invalid, ${expected.duplicates} repeats\n`,
  )

  const base = process.env.DATABASE_URL
  const real = base !== undefined && base !== ""
  const dbName = `parley_bench_${randomBytes(5).toString("hex")}`
  const admin = real ? connectPostgres(base, 1) : undefined
  const env: Record<string, string> = {
    HOST: "127.0.0.1",
    PORT: "0",
    DATA_DIR: join(dir, "data"),
    LOG_LEVEL: "info",
    CALLING_HOURS: "any",
  }
  if (real) {
    await admin!.unsafe(`create database ${dbName}`)
    env.DATABASE_URL = withDatabase(base, dbName)
    process.stdout.write(`scratch database ${redact(env.DATABASE_URL)}\n`)
  }
  const server = await startProcess(["--import", "tsx", "src/main/main.ts", "serve", "--role", "all"], env)
  const pid = server.child.pid!
  const url = `http://127.0.0.1:${server.port}`
  const alone: number[] = []
  const parsed: number[] = []
  const uploads: Upload[] = []
  let idle: { hwm: number; rss: number }
  let serverHwm = 0
  let scaled: { expected: Expected; bytes: number; upload: Upload } | undefined
  try {
    const email = `bench-${randomBytes(4).toString("hex")}@example.com`
    const password = "bench-password-1"
    expectStatus("signup", await call(url, "POST", "/auth/signup", { body: { email, password, country: "US" } }), 201)
    const login = await call(url, "POST", "/auth/login", { body: { email, password } })
    expectStatus("login", login, 200)
    const token = String(login.body["token"])
    const workflow = async () => {
      const created = await call(url, "POST", "/api/workflows", {
        bearer: token,
        body: { nl_prompt: "Tell customers about the spring sale and offer a callback." },
      })
      expectStatus("create workflow", created, 201)
      return Number(created.body["id"])
    }
    // Warm up both sides (JIT, the server's first upload) on a small file.
    const small = join(dir, "small.csv")
    generate(small, 2000)
    expectStatus(
      "warm-up upload",
      await (async () => {
        const form = new FormData()
        form.set("file", await openAsBlob(small), "small.csv")
        const res = await fetch(`${url}/api/workflows/${await workflow()}/audience`, {
          method: "POST",
          body: form,
          headers: { authorization: `Bearer ${token}` },
        })
        return { status: res.status, body: await res.json() }
      })(),
      200,
    )
    await csvParseAlone(file)
    idle = memory(pid)

    for (let round = 0; round < ROUNDS; round++) {
      alone.push(await csvParseAlone(file))
      parsed.push(await parseAndNormalise(file, expected))
      const u = await upload(url, token, await workflow(), file, pid, expected)
      uploads.push(u)
      process.stdout.write(
        `round ${round + 1}: csv-parse ${Math.round(alone.at(-1)!)} rows/s, parse+normalise ` +
          `${Math.round(parsed.at(-1)!)} rows/s, endpoint ${Math.round(u.rps)} rows/s (${u.seconds.toFixed(1)} ` +
          `s), server RSS peak ${mib(u.peakRssKiB)}\n`,
      )
    }
    // The same upload with a file SCALE times larger: if the server held rows, its peak would grow with them.
    const bigFile = join(dir, "big.csv")
    const bigExpected = generate(bigFile, ROWS * SCALE)
    const big = await upload(url, token, await workflow(), bigFile, pid, bigExpected)
    scaled = { expected: bigExpected, bytes: statSync(bigFile).size, upload: big }
    process.stdout.write(
      `${ROWS * SCALE} rows: endpoint ${Math.round(big.rps)} rows/s (${big.seconds.toFixed(1)} s), server ` +
        `RSS ${mib(big.rssBeforeKiB)} before, peak ${mib(big.peakRssKiB)}\n`,
    )
    serverHwm = memory(pid).hwm
  } finally {
    await server.stop()
    if (real) {
      await admin!.unsafe(`drop database if exists ${dbName} with (force)`)
      await admin!.end({ timeout: 5 })
    }
    rmSync(dir, { recursive: true, force: true })
  }
  const self = memory("self")
  const a = median(alone)
  const p = median(parsed)
  const e = median(uploads.map((u) => u.rps))
  const growth = Math.max(...uploads.map((u) => u.peakRssKiB - u.rssBeforeKiB))
  const big = scaled!
  const bigGrowth = big.upload.peakRssKiB - big.upload.rssBeforeKiB
  // Held rows would make the growth follow the file; allow for the collector's slack.
  const verdict =
    bigGrowth < growth * (SCALE / 2) + 32 * 1024
      ? `the growth does not follow the file size (the file is parsed as it arrives and staged 1,000 rows at a ` +
        `time; what grows is garbage the collector has not taken back yet).`
      : `**the growth followed the file size** (${(bigGrowth / Math.max(growth, 1)).toFixed(1)}× for a ` +
        `${SCALE}× file): something holds rows.`
  const c = uploads[0]!.counts
  const md =
    `## audience — POST /api/workflows/{id}/audience with a ${ROWS.toLocaleString("en")}-row CSV vs csv-parse ` +
    `alone\n\n` +
    `Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; database: ` +
    (real
      ? "PostgreSQL (DATABASE_URL), scratch database"
      : "embedded PGlite (the default, one connection, in the server process)") +
    `. The server (\`src/main/main.ts serve\` through tsx, LOG_LEVEL=info) in its own process; the bench ` +
    `uploads from this process with \`fetch\` and a file-backed \`Blob\` (\`fs.openAsBlob\`), so neither side ` +
    `holds the file. The file: ${(bytes / 2 ** 20).toFixed(1)} MiB, header + 5 columns, quoted names with ` +
    `commas and escaped quotes, notes spanning lines, extra columns on 1 row in 40, blank lines; ` +
    `${expected.invalid} invalid numbers, ${expected.duplicates} repeats written another way, ` +
    `${expected.unique} distinct valid numbers. Each round attaches it to a new workflow (after a warm-up ` +
    `upload of 2,000 rows); medians of ${ROUNDS} rounds.\n\n` +
    `| what | rows/s |\n` +
    `|---|---:|\n` +
    `| csv-parse alone (same options: bom, trim, relax_column_count, skip_empty_lines), file stream, records ` +
    `counted | ${Math.round(a)} |\n` +
    `| \`parseAudienceCsv\` without the database (csv-parse + header roles + libphonenumber E.164 on every ` +
    `row) | ${Math.round(p)} |\n` +
    `| the endpoint: upload, parse, normalise, stage in 1,000-row inserts, merge (DNC, registry, cool-down, ` +
    `dedupe, upsert) in one transaction | ${Math.round(e)} |\n\n` +
    `**Endpoint / csv-parse alone: ${(e / a).toFixed(2)}×** (${(1 / (e / a)).toFixed(1)}× slower; ` +
    `${median(uploads.map((u) => u.seconds)).toFixed(1)} s for the file). Answer of the first round: accepted ` +
    `${c["accepted"]}, rejected_invalid ${c["rejected_invalid"]}, duplicates ${c["duplicates"]}, total_targets ` +
    `${c["total_targets"]} (checked against the generator).\n` +
    `Memory (server RSS sampled every 50 ms during each upload, against its value just before): idle ` +
    `${mib(idle!.rss)} after the warm-up; **at most +${mib(growth)} during the ${(bytes / 2 ** 20).toFixed(1)} ` +
    `MiB uploads, and +${mib(bigGrowth)} during one upload of a ${SCALE}× file** ` +
    `(${(big.expected.rows).toLocaleString("en")} rows, ${(big.bytes / 2 ** 20).toFixed(1)} MiB, ` +
    `${Math.round(big.upload.rps)} rows/s, ${big.upload.seconds.toFixed(1)} s): ${verdict} The server's VmHWM ` +
    `over its life, start-up included: ${mib(serverHwm)}. This bench process (generator, csv-parse runs, ` +
    `uploader): VmHWM ${mib(self.hwm)}. 1-minute load average ${loadBefore.toFixed(1)} before and ` +
    `${loadavg()[0]!.toFixed(1)} after (the machine is shared).`
  process.stdout.write(`\n${md}\n`)
  record("audience", md)
}
