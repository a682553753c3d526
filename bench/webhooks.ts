// bench/webhooks: how fast the delivery worker (runtime/workers/webhook-delivery.ts) drains a backlog of
// webhook deliveries to a local receiver (claim by lease, sign, POST, record the attempt) against a
// bare undici POST loop of the same bodies at the same concurrency to the same receiver; and the
// delay from an event's commit to its first attempt: by the poll alone, woken by the commit's NOTIFY,
// and with a bus nudge after commit as well.
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import pino from "pino"
import { Agent, request, fetch as undiciFetch } from "undici"
import { startWebhookDelivery } from "../runtime/workers/webhook-delivery.js"
import { makeMemoryBus } from "../src/platform/bus/memory.bus.js"
import { loadConfig } from "../src/platform/config.js"
import { redact, type Sql } from "../src/platform/Db.js"
import { migrate } from "../src/platform/Migrator.js"
import { RT_WEBHOOKS_DUE } from "../src/platform/subjects.js"
import { IN_FLIGHT_PER_WORKSPACE } from "../src/webhooks/delivery.js"
import { emitEvent, emitEvents } from "../src/webhooks/outbox.repo.js"
import { newWebhookSecret, webhookSecretBox, webhookSecretKey } from "../src/webhooks/secrets.js"
import { signWebhook } from "../src/webhooks/signing.js"
import { machine, record, scratchDatabase } from "./lib.js"

const BACKLOG = Number(process.env.BENCH_WEBHOOK_BACKLOG ?? 1500)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
/** The worker's slots per process (its CONCURRENCY); the baseline loops post as many at once. */
const CONCURRENCY = 32
const LAG_EVENTS = Number(process.env.BENCH_WEBHOOK_LAG_EVENTS ?? 120)
const LAG_RATE_PER_S = 30

const quantile = (sorted: readonly number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
const median = (xs: number[]) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  )

/** The receiver every variant posts to: 200 at once, the arrival time of each event id noted. */
async function startReceiver() {
  const arrivals = new Map<string, number>()
  let count = 0
  const server = createServer({ keepAliveTimeout: 30_000 }, (req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    req.on("end", () => {
      count++
      const id = req.headers["x-svc-event-id"]
      if (typeof id === "string" && !arrivals.has(id)) arrivals.set(id, performance.now())
      res.writeHead(200, { "content-type": "text/plain", "content-length": "2" })
      res.end("ok")
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrivals,
    count: () => count,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

async function workspaceWithEndpoint(
  sql: Sql,
  key: Buffer,
  url: string,
): Promise<{ tenantId: number; endpointId: number }> {
  const [t] = await sql<[{ id: number }]>`
    insert into tenants (name, country, currency)
    values (${`bench-webhooks-${randomBytes(3).toString("hex")}`}, 'US', 'USD')
    returning id`
  const [ep] = await sql<[{ id: number }]>`
    insert into webhook_endpoints (tenant_id, url, events, secret_ciphertext)
    values (${t.id}, ${url}, ${sql.array(["*"])}, ${webhookSecretBox(key).seal(newWebhookSecret(), t.id)})
    returning id`
  return { tenantId: t.id, endpointId: ep.id }
}

/** An event body as the outbox stores a call.completed (about 400 bytes). */
const sampleData = (i: number) => ({
  call_id: i,
  run_id: 1,
  workflow_id: 1,
  status: "ended",
  outcome: "interested",
  duration_seconds: 93,
  to: "+12025550123",
  started_at: new Date().toISOString(),
  ended_at: new Date().toISOString(),
  cost_minor: 150,
  version: 3,
})

async function seed(sql: Sql, tenantId: number, n: number): Promise<void> {
  for (let i = 0; i < n; i += 500)
    await sql.begin((tx) =>
      emitEvents(
        tx,
        Array.from({ length: Math.min(500, n - i) }, (_, k) => ({
          tenantId,
          type: "call.completed" as const,
          data: sampleData(i + k),
        })),
      ),
    )
}

async function waitUntil(probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error("bench: timed out")
    await new Promise((r) => setTimeout(r, 20))
  }
}

export async function benchWebhooks(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres"
  const db = await scratchDatabase(baseUrl, "bench_webhooks", 10)
  process.stdout.write(`scratch database ${redact(db.url)}\n`)
  const receiver = await startReceiver()
  const config = loadConfig({
    DATA_DIR: join(tmpdir(), `bench-webhooks-${randomBytes(3).toString("hex")}`),
    DATABASE_URL: db.url,
    ALLOW_PRIVATE_PROVIDER_URLS: "true",
  })
  const log = pino({ level: "silent" })
  const bus = makeMemoryBus()
  const load0 = loadavg()[0]!
  try {
    await migrate(db.sql)
    const key = await webhookSecretKey(config, db.sql)
    const sample = Buffer.from(
      JSON.stringify({ id: "evt_x", type: "call.completed", created_at: "", tenant_id: 1, data: sampleData(1) }),
    )
    const secret = newWebhookSecret()

    const worker: number[] = []
    const bareFetch: number[] = []
    const bareRequest: number[] = []
    // Round 0 warms up (JIT, the pool's connections, the statements' plans) and is not counted.
    for (let round = 0; round <= ROUNDS; round++) {
      const n = round === 0 ? 300 : BACKLOG
      // The worker drains a backlog committed before it starts.
      const { tenantId } = await workspaceWithEndpoint(db.sql, key, receiver.url)
      await seed(db.sql, tenantId, n)
      const t0 = performance.now()
      const w = startWebhookDelivery({ sql: db.sql, bus, log, config, me: `bench-${round}`, mail: undefined })
      await waitUntil(async () => {
        const [r] = await db.sql<[{ n: number }]>`
          select count(*)::int as n from webhook_deliveries where tenant_id = ${tenantId} and status = 'delivered'`
        return r.n >= n
      }, 120_000)
      const workerRate = n / ((performance.now() - t0) / 1000)
      await w.stop()

      // The same number of signed POSTs of a body of the same size, CONCURRENCY loops, nothing recorded.
      const agent = new Agent({ connections: CONCURRENCY })
      for (const [variant, out] of [
        ["fetch", bareFetch],
        ["request", bareRequest],
      ] as const) {
        let next = 0
        const t1 = performance.now()
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (next++ < n) {
              const headers = {
                "content-type": "application/json",
                "x-svc-event-id": `evt_${next}`,
                "x-svc-signature": signWebhook(sample, [secret], Date.now() / 1000),
              }
              if (variant === "fetch") {
                const res = await undiciFetch(receiver.url, {
                  method: "POST",
                  headers,
                  body: sample,
                  dispatcher: agent,
                })
                await res.arrayBuffer()
              } else {
                const res = await request(receiver.url, { method: "POST", headers, body: sample, dispatcher: agent })
                await res.body.arrayBuffer()
              }
            }
          }),
        )
        if (round > 0) out.push(n / ((performance.now() - t1) / 1000))
      }
      if (round > 0) worker.push(workerRate)
      await agent.close()
    }

    // Commit → first attempt: one event per transaction at a steady rate, the worker running.
    // "poll": no LISTEN (as on the embedded database); "notify": the commit's NOTIFY wakes the worker;
    // "bus": a nudge published after commit as well.
    const lag = async (how: "poll" | "notify" | "bus"): Promise<number[]> => {
      const { tenantId } = await workspaceWithEndpoint(db.sql, key, receiver.url)
      const cfg = how === "poll" ? { ...config, databaseUrl: undefined } : config
      const w = startWebhookDelivery({ sql: db.sql, bus, log, config: cfg, me: `bench-lag-${how}`, mail: undefined })
      const committed = new Map<string, number>()
      for (let i = 0; i < LAG_EVENTS; i++) {
        const id = await emitEvent(db.sql, { tenantId, type: "call.completed", data: sampleData(i) })
        committed.set(id, performance.now())
        if (how === "bus") bus.publish(RT_WEBHOOKS_DUE)
        await new Promise((r) => setTimeout(r, 1000 / LAG_RATE_PER_S))
      }
      await waitUntil(async () => [...committed.keys()].every((id) => receiver.arrivals.has(id)), 30_000)
      await w.stop()
      return [...committed].map(([id, at]) => receiver.arrivals.get(id)! - at).sort((a, b) => a - b)
    }
    const polled = await lag("poll")
    const notified = await lag("notify")
    const nudged = await lag("bus")
    const load1 = loadavg()[0]!

    // Paired by round (the machine's load moves between rounds more than within one).
    const ratio = (xs: number[], base: number[]) => median(xs.map((x, i) => x / base[i]!))
    const line = (label: string, xs: number[]) =>
      `| ${label} | ${xs.map((x) => Math.round(x)).join(", ")} | ${Math.round(median(xs))} |`
    const ms = (xs: number[], q: number) => quantile(xs, q).toFixed(1)
    const toRequest = ratio(worker, bareRequest).toFixed(2)
    const toFetch = ratio(worker, bareFetch).toFixed(2)
    const markdown = `
## webhooks — delivery worker vs a bare undici POST loop; commit → first attempt

Machine: ${machine()}. Run ${new Date().toISOString().slice(0, 10)}; PostgreSQL ${db.pgVersion}
(scratch database), the worker in the bench process with a pool of 10, the receiver (node:http, 200 at once) in the
same process, ${ROUNDS} rounds of a ${BACKLOG}-event backlog to one endpoint after a warm-up; the bare
loops post ${CONCURRENCY} at once, the worker ${IN_FLIGHT_PER_WORKSPACE} (its cap for one workspace, half its
slots). Load
average (1 min) ${load0.toFixed(2)} at the start, ${load1.toFixed(2)} at the end, on 2 cores shared with other work.

| variant | per round, deliveries/s | median |
|---|---|---:|
${line("worker: claim by lease, sign, POST (undici `request`), record the attempt and the delivery", worker)}
${line("bare undici `fetch` POST loop, signed, nothing recorded", bareFetch)}
${line("bare undici `request` POST loop, signed, nothing recorded", bareRequest)}

**Worker / bare request (the same client): ${toRequest}×**; worker / bare fetch: ${toFetch}× (medians of the
per-round ratios).

Commit → first attempt (arrival at the receiver), ${LAG_EVENTS} events one per transaction at ${LAG_RATE_PER_S}/s:

| how the worker learns of the event | p50 ms | p99 ms | max ms |
|---|---:|---:|---:|
| poll only (250 ms, to 2 s idle; embedded) | ${ms(polled, 0.5)} | ${ms(polled, 0.99)} | ${ms(polled, 1)} |
| the commit's NOTIFY (real PostgreSQL) | ${ms(notified, 0.5)} | ${ms(notified, 0.99)} | ${ms(notified, 1)} |
| NOTIFY and \`rt.webhooks.due\` published after commit | ${ms(nudged, 0.5)} | ${ms(nudged, 0.99)} | ${ms(nudged, 1)} |
`
    process.stdout.write(markdown)
    record("webhooks", markdown)
  } finally {
    await receiver.close()
    await db.drop()
  }
}
