// The results CSV of a 100,000-target run streams in bounded memory: seeded with generate_series,
// read by a client slower than the server, the server's memory stays far below the file's size,
// and every row arrives once, in order. Pages are sized by bytes, not rows. A client that leaves
// stops the reading of pages; a workspace's third export at once is 429.
import { type ClientRequest, request } from "node:http"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { parse } from "csv-parse"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { writeResultsCsv } from "../../src/results/results.csv.js"
import type { ResultRow } from "../../src/results/results.repo.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

// Every page query the server makes, counted (the server runs in this process, on the same modules).
// A plain counter: a vi.fn would keep every page it returned.
const counted = vi.hoisted(() => ({ pageReads: 0 }))
vi.mock(import("../../src/results/results.repo.js"), async (importOriginal) => {
  const original = await importOriginal()
  return {
    ...original,
    resultsPage: (...args: Parameters<typeof original.resultsPage>) => {
      counted.pageReads++
      return original.resultsPage(...args)
    },
  }
})
const pageReads = () => counted.pageReads

const TARGETS = 100_000
// Each row carries a 400-character summary and a 300-character field: about 800 bytes, so the file
// (~75 MB) is several times the memory bound below.
const MEMORY_BOUND = 16 * 2 ** 20
// The reader stops once for this long. A server ignoring backpressure reads on meanwhile (measured
// on PGlite: rss +66 MB in 5 s); one that waits for the socket reads what fills the socket buffers,
// then holds a page and one read ahead, and reads nothing more. The pages it reads show that
// directly; its rss does not (the allocator's ups and downs alone: -6 to +27 MB over a stall, on
// both databases). Under uWS's 10 s idle timeout: a client that takes nothing for that long is
// disconnected (tried: 10 s here cut the download off).
const STALL_MS = 6_000
const STALL_BOUND = 24 * 2 ** 20
/** By then the socket buffers are full and the server holds still (it reads ~5 MB of pages a second). */
const SETTLE_MS = 3_000

// The collector, to measure what is retained (vitest's forks do not pass --expose-gc).
setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

describe("writeResultsCsv", () => {
  const row = (target_id: number): ResultRow => ({
    target_id,
    phone: "+14155550100",
    name: null,
    status: "done",
    outcome: "agreed",
    attempts: 1,
    talk_seconds: 1,
    cost_minor: 1,
    analysis_status: null,
    summary: null,
    goal_met: null,
    sentiment: null,
    callback_at: null,
    agreed_value_minor: null,
    decision_effect: null,
    call_id: null,
    arm: null,
    fields: null,
  })

  const pages = (rows: number) => ({ firstRows: rows, maxRows: rows, pageBytes: 2 ** 30 })

  it("stops reading pages once the client is gone (one page read ahead at most)", async () => {
    const reads: number[] = []
    const written: string[] = []
    await writeResultsCsv(
      { write: async (chunk) => written.push(chunk) < 3 },
      { fields: [], currency: "USD", pages: pages(2) },
      async (after) => {
        reads.push(after)
        // The read ahead of a gone client fails: nobody is told, and nothing is unhandled.
        if (reads.length === 3) throw new Error("connection lost")
        return [row(after + 1), row(after + 2)]
      },
    )
    expect(written).toHaveLength(3)
    expect(reads).toEqual([0, 2, 4])
  })

  it("ends after a short page without reading another", async () => {
    const reads: number[] = []
    let out = ""
    await writeResultsCsv(
      { write: async (chunk) => ((out += chunk), true) },
      { fields: ["x"], currency: "INR", pages: pages(2) },
      async (after) => {
        reads.push(after)
        return after === 0 ? [row(1), row(2)] : [row(3)]
      },
    )
    expect(reads).toEqual([0, 2])
    expect(out.split("\r\n").filter(Boolean)).toHaveLength(4)
  })

  it("sizes pages by bytes: wide rows are read fewer at a time, narrow ones up to the row cap", async () => {
    const limits = async (summary: string) => {
      const asked: number[] = []
      let written = 0
      await writeResultsCsv(
        { write: async (chunk) => ((written += Buffer.byteLength(chunk)), true) },
        { fields: [], currency: "USD", pages: { firstRows: 10, maxRows: 1_000, pageBytes: 64 * 1024 } },
        async (after, limit) => {
          asked.push(limit)
          // 5,000 targets in all.
          const n = Math.max(0, Math.min(limit, 5_000 - after))
          return Array.from({ length: n }, (_, i) => ({ ...row(after + i + 1), summary }))
        },
      )
      return { asked, written }
    }
    // About 8 KB a row (a long summary): 64 KiB pages hold 7 or 8 of them.
    const wide = await limits("w".repeat(8_000))
    expect(wide.asked[0]).toBe(10)
    expect(Math.max(...wide.asked.slice(1))).toBeLessThanOrEqual(8)
    expect(wide.written).toBeGreaterThan(5_000 * 8_000)
    // About 60 bytes a row: doubling from 10 up to the 1,000-row cap.
    const narrow = await limits("ok")
    expect(narrow.asked.slice(0, 5)).toEqual([10, 20, 40, 80, 160])
    expect(Math.max(...narrow.asked)).toBe(1_000)
  })
})

describe(`the CSV of a ${TARGETS.toLocaleString("en")}-target run`, () => {
  let srv: TestServer
  let owner: Session
  let runId: number

  beforeAll(async () => {
    srv = await startTestServer()
    const a = api(srv)
    owner = await a.signup({ country: "IN" })
    const res = await a.call("POST", "/api/workflows", { token: owner.token, body: { nl_prompt: "Renewals." } })
    const w = (await res.json()) as { id: number; rule_book_id: number }
    const t = owner.tenantId
    const { sql } = srv
    await sql`update rule_books set body = jsonb_set(body, '{analysis}', ${sql.json({
      fields: [{ name: "note", type: "string", description: "what to pass on" }],
    })}) where id = ${w.rule_book_id}`
    const [run] = await sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, rule_book_id, status, targets_total)
      values (${t}, ${w.id}, ${w.rule_book_id}, 'completed', ${TARGETS}) returning id`
    runId = run.id
    await sql`
      insert into audience_targets (tenant_id, workflow_id, phone_e164, name)
      select ${t}, ${w.id}, '+9198' || lpad(i::text, 8, '0'), 'Person ' || i
      from generate_series(1, ${TARGETS}::int) i`
    await sql`
      insert into run_targets (tenant_id, run_id, target_id, phone_e164, status, attempts, outcome)
      select ${t}, ${runId}, id, phone_e164, 'done', 1, 'agreed' from audience_targets where workflow_id = ${w.id}`
    // No answered_at: the analysis worker (which looks for answered calls without an analysis) leaves
    // these alone, so it does not spend the test analysing 100,000 calls; the export does not read it.
    await sql`
      insert into calls (tenant_id, run_id, workflow_id, run_target_id, target_id, attempt, phone_e164, provider,
        owner_instance, status, outcome, connected_seconds, cost_minor, ended_at)
      select ${t}, ${runId}, ${w.id}, id, target_id, 1, phone_e164, 'sim', 'seed', 'ended', 'agreed', 61, 250, now()
      from run_targets where run_id = ${runId}`
    await sql`
      insert into call_analyses (call_id, tenant_id, run_id, status, summary, goal_met, sentiment, fields, model,
        analyzed_at)
      select id, ${t}, ${runId}, 'done', left('Summary of call ' || id || ': ' || repeat('agreed to renew, ', 30), 400),
        true, 'positive', jsonb_build_object('note', '=' || repeat('x', 299)), 'sim', now()
      from calls where run_id = ${runId}`
  }, 240_000)
  afterAll(async () => srv?.stop())

  it("streams every row once, in order, while the server's memory stays bounded", async () => {
    const used = () => {
      // Retained memory, not garbage the collector has yet to reach.
      gc()
      const m = process.memoryUsage()
      return { heap: m.heapUsed, rss: m.rss }
    }
    const before = used()
    let peak = { ...before }
    let stall: { before: ReturnType<typeof used>; after: ReturnType<typeof used> } | undefined
    // Page queries when the stall began, once the socket buffers were full, and when it ended.
    const stallReads = { start: 0, settled: 0, end: 0 }
    let bytes = 0
    let records = 0
    let lastId = 0
    let ordered = true
    const t0 = performance.now()
    await new Promise<void>((resolve, reject) => {
      const req = request(`${srv.url}/api/runs/${runId}/results?format=csv`, {
        headers: { authorization: `Bearer ${owner.token}` },
      })
      req.on("error", reject)
      req.on("response", (res) => {
        if (res.statusCode !== 200) {
          let body = ""
          res.on("data", (c: Buffer) => (body += c.toString()))
          res.on("end", () => reject(new Error(`export answered ${res.statusCode}: ${body.slice(0, 300)}`)))
          return
        }
        const parser = parse({ from_line: 2 })
        parser.on("data", (rec: string[]) => {
          records++
          const id = Number(rec[0])
          if (!(id > lastId)) ordered = false
          lastId = id
        })
        parser.on("error", reject)
        parser.on("end", resolve)
        res.on("error", reject)
        res.on("aborted", () => reject(new Error(`the download was cut off after ${bytes} bytes`)))
        // A slow reader: it stops for STALL_MS once, early (a server that ignored the socket would
        // go on reading pages into its buffers meanwhile), then pauses after every 8 MB.
        let sincePause = 0
        res.on("data", (chunk: Buffer) => {
          bytes += chunk.length
          sincePause += chunk.length
          parser.write(chunk)
          if (stall === undefined && bytes > 4 * 2 ** 20) {
            res.pause()
            const at = used()
            stallReads.start = pageReads()
            setTimeout(() => (stallReads.settled = pageReads()), SETTLE_MS)
            setTimeout(() => {
              stallReads.end = pageReads()
              stall = { before: at, after: used() }
              res.resume()
            }, STALL_MS)
            return
          }
          if (sincePause < 8 * 2 ** 20) return
          sincePause = 0
          res.pause()
          setTimeout(() => {
            const m = used()
            peak = { heap: Math.max(peak.heap, m.heap), rss: Math.max(peak.rss, m.rss) }
            res.resume()
          }, 50)
        })
        res.on("end", () => parser.end())
      })
      req.end()
    })
    const seconds = (performance.now() - t0) / 1000
    const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MB`
    const growth = { heap: peak.heap - before.heap, rss: peak.rss - before.rss }
    const stalled = { heap: stall!.after.heap - stall!.before.heap, rss: stall!.after.rss - stall!.before.rss }
    console.log(
      `results csv: ${records} rows, ${mb(bytes)} in ${seconds.toFixed(1)} s; peak over the start: heap ` +
        `+${mb(growth.heap)}, rss +${mb(growth.rss)}; over the ${STALL_MS / 1000} s stall: heap ` +
        `+${mb(stalled.heap)}, rss +${mb(stalled.rss)}, pages read ${stallReads.settled - stallReads.start} then ` +
        `${stallReads.end - stallReads.settled}`,
    )
    expect(records).toBe(TARGETS)
    expect(ordered).toBe(true)
    expect(bytes).toBeGreaterThan(4 * MEMORY_BOUND)
    // What the process retains. (Its rss over the whole download is no measure: it takes in the
    // embedded database's WebAssembly memory, which grows as it reads the run.)
    expect(growth.heap).toBeLessThan(MEMORY_BOUND)
    // While the client reads nothing the server holds still: it reads what fills the socket buffers
    // (about 5 MB, ten pages), then a page waits for the socket and one read ahead, and no more are read.
    expect(stallReads.settled - stallReads.start).toBeLessThan(20)
    expect(stallReads.end - stallReads.settled).toBeLessThanOrEqual(1)
    expect(stalled.heap).toBeLessThan(STALL_BOUND)
  }, 180_000)

  it("stops reading pages when the client leaves, and the server goes on serving", async () => {
    const before = pageReads()
    const got = await new Promise<number>((resolve, reject) => {
      const req = request(`${srv.url}/api/runs/${runId}/results?format=csv`, {
        headers: { authorization: `Bearer ${owner.token}` },
      })
      req.on("error", () => {})
      req.on("response", (res) => {
        let n = 0
        res.on("data", (chunk: Buffer) => {
          n += chunk.length
          if (n > 2 ** 20) {
            req.destroy()
            resolve(n)
          }
        })
        res.on("end", () => reject(new Error("the whole file arrived")))
      })
      req.end()
    })
    expect(got).toBeGreaterThan(2 ** 20)
    // The reads stop with the client: what the socket held and one page read ahead, then nothing more.
    await new Promise((r) => setTimeout(r, 1_000))
    const stopped = pageReads() - before
    await new Promise((r) => setTimeout(r, 1_000))
    expect(pageReads() - before).toBe(stopped)
    // Far from the file's ~150 pages (about 512 KiB of CSV each), read by a client that stayed.
    expect(stopped).toBeGreaterThan(0)
    expect(stopped).toBeLessThan(30)
    const res = await fetch(`${srv.url}/api/runs/${runId}/results?limit=1`, {
      headers: { authorization: `Bearer ${owner.token}` },
    })
    expect(res.status).toBe(200)
    expect(((await res.json()) as { results: unknown[] }).results).toHaveLength(1)
  }, 60_000)

  it("refuses a workspace's third export at once with 429 RATE_LIMITED and Retry-After, until one ends", async () => {
    const url = `${srv.url}/api/runs/${runId}/results?format=csv`
    const headers = { authorization: `Bearer ${owner.token}` }
    // Two exports whose clients read nothing after the headers: both stay open.
    const open: ClientRequest[] = []
    const started = async () => {
      const req = request(url, { headers })
      req.on("error", () => {})
      const status = await new Promise<number>((resolve) => {
        req.on("response", (res) => {
          res.pause()
          resolve(res.statusCode ?? 0)
        })
        req.end()
      })
      open.push(req)
      return status
    }
    try {
      expect(await started()).toBe(200)
      expect(await started()).toBe(200)
      const third = await fetch(url, { headers })
      expect(third.status).toBe(429)
      expect(third.headers.get("retry-after")).toBe("5")
      expect(third.headers.get("content-type")).toMatch(/^application\/json/)
      expect(await third.json()).toMatchObject({ code: "RATE_LIMITED", retry_after_seconds: 5 })
      // JSON pages are not exports: still served.
      expect((await fetch(`${srv.url}/api/runs/${runId}/results?limit=1`, { headers })).status).toBe(200)
      // One client leaves: its slot comes back.
      open.shift()!.destroy()
      await expect
        .poll(
          async () => {
            const res = await fetch(url, { headers })
            await res.body?.cancel()
            return res.status
          },
          { timeout: 10_000, interval: 200 },
        )
        .toBe(200)
    } finally {
      for (const req of open) req.destroy()
    }
  }, 60_000)
})
