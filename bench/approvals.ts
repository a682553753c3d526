// bench/approvals: from a decision's HTTP response to the agent speaking again on the call, across
// one api and one runtime process on real Postgres and NATS, split into its hops; against a bare NATS round trip.
import { randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { Agent, type IncomingMessage, request } from "node:http"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { redact } from "../src/platform/Db.js"
import { machine, record, type ServerProcess, scratchDatabase, startProcess, verifyEmail } from "./lib.js"

/** Decisions measured, after WARMUP unmeasured ones. */
const N = Number(process.env.BENCH_APPROVALS_N ?? 200)
const WARMUP = 10
/**
 * SIM_TIME_SCALE of both processes. Every call holds for its decision, and a call is cut at its
 * rule book's max_call_seconds (set to the 1800 s maximum) × this, so the last decision must come
 * within 36 s of its call's answer; the resumed line takes ~100 ms to speak at this scale.
 */
const SCALE = Number(process.env.BENCH_APPROVALS_SCALE ?? 0.02)
/** Pause between one decision's resumed turn and the next decision, drawn uniformly from [0, GAP_MS). */
const GAP_MS = 20
const ROUND_TRIPS = 500
/** The sim's agent voice (src/providers/telephony/sim.telephony.ts), to check speech is not in the figure. */
const WORDS_PER_SECOND = 2.6
/** The TurnSink's longest batch wait (runtime/actors/turns.ts). */

/** Epoch ms with sub-millisecond resolution, on this process's monotonic clock. */
const now = (): number => performance.timeOrigin + performance.now()
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "—")
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "—")

interface Stats {
  readonly n: number
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly min: number
}

function stats(xs: readonly number[]): Stats {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] ?? NaN
  return { n: s.length, p50: q(0.5), p99: q(0.99), max: s.at(-1) ?? NaN, min: s[0] ?? NaN }
}

// ---- HTTP: one keep-alive connection, as a dashboard's would be ----

const agent = new Agent({ keepAlive: true, maxSockets: 4 })

interface Reply {
  readonly status: number
  readonly body: Record<string, unknown>
  /** When the last byte of the response arrived. */
  readonly at: number
}

function http(base: string, method: string, path: string, body?: unknown, token?: string): Promise<Reply> {
  const payload = body === undefined ? undefined : JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const req = request(
      base + path,
      {
        method,
        agent,
        headers: {
          ...(payload !== undefined && {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(payload),
          }),
          ...(token !== undefined && { authorization: `Bearer ${token}` }),
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          const at = now()
          const text = Buffer.concat(chunks).toString()
          resolve({
            status: res.statusCode ?? 0,
            body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>),
            at,
          })
        })
        res.on("error", reject)
      },
    )
    req.on("error", reject)
    req.end(payload)
  })
}

async function ok(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  token?: string,
): Promise<Record<string, unknown>> {
  const r = await http(base, method, path, body, token)
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`)
  return r.body
}

interface Turn {
  readonly seq: number
  readonly call_id: number | null
  readonly turn_index: number
  readonly speaker: string
  readonly text: string
  readonly at: string
}

/** GET /api/runs/{id}/turns/stream on its own connection: each turn with its arrival time. */
function openTurnStream(
  base: string,
  runId: number,
  token: string,
  onTurn: (t: Turn, at: number) => void,
): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/api/runs/${runId}/turns/stream`,
      { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" } },
      (res: IncomingMessage) => {
        if (res.statusCode !== 200) return reject(new Error(`turn stream: ${res.statusCode}`))
        let carry = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          const at = now()
          const events = (carry + chunk).split("\n\n")
          carry = events.pop()!
          for (const e of events)
            for (const line of e.split("\n"))
              if (line.startsWith("data: ")) onTurn(JSON.parse(line.slice(6)) as Turn, at)
        })
        res.on("error", () => {})
        resolve(() => req.destroy())
      },
    )
    req.on("error", reject)
    req.end()
  })
}

// ---- one decision ----

interface Decision {
  readonly approvalId: number
  readonly callId: number
  /** Turns the call had when it proposed: the resumed line is the first agent turn from this index. */
  readonly fromIndex: number
  tReq: number
  t0: number
  status: number
  /** The bench heard rt.approval.decided. */
  tBus: number
  /** The resumed agent turn: arrival on NATS, its `at` (runtime clock, whole ms), its text and index. */
  t1: number
  at: number
  text: string
  index: number
  /** The same turn over SSE from the api process. */
  tSse: number
  /** `at` of the callee's next utterance (it begins once the agent's line has been spoken). */
  calleeAt: number
  done: () => void
}

async function roundTrips(nc: NatsConnection, subject: string, count: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < count; i++) {
    const t = performance.now()
    await nc.request(subject, "", { timeout: 2000 })
    out.push(performance.now() - t)
  }
  return out
}

export async function benchApprovals(): Promise<void> {
  const baseUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres"
  const natsUrl = process.env.NATS_URL || "nats://127.0.0.1:4222"
  const loadBefore = loadavg()[0]!
  const ns = `benchappr${randomBytes(4).toString("hex")}`
  const scratch = await scratchDatabase(baseUrl, "parley_bench_appr")
  const { url: dbUrl, sql } = scratch
  const pg = { version: scratch.pgVersion }
  process.stdout.write(`database ${redact(dbUrl)}, NATS ${natsUrl}, namespace ${ns}\n`)

  const env = {
    HOST: "127.0.0.1",
    PORT: "0",
    DATABASE_URL: dbUrl,
    NATS_URL: natsUrl,
    BUS_NAMESPACE: ns,
    LOG_LEVEL: "info",
    // The stub funds the bench workspace: a DATABASE_URL deployment runs real gateways unless told.
    PAYMENTS: "stub",
    // Read back for the verification link: runs need a verified owner.
    OUTBOX_FILE: join(mkdtempSync(join(tmpdir(), "parley-bench-appr-")), "outbox.jsonl"),
    DB_POOL_MAX: "10",
    SIM_TIME_SCALE: String(SCALE),
    CALLING_HOURS: "any",
    DIALER_CPS_PER_CARRIER: "1000",
    DIALER_CPS_PER_TENANT: "1000",
    DIALER_MAX_CONCURRENT_PER_WORKFLOW: String(4 * (N + WARMUP)),
    DIALER_MAX_CONCURRENT_PER_TENANT: String(4 * (N + WARMUP)),
    RUN_CLAIM_INTERVAL_MS: "200",
    // × SIM_TIME_SCALE: the calls hold for half an hour, far longer than the bench.
    APPROVAL_HOLD_MS: "100000000",
  }
  const problems: string[] = []
  const watch = (p: ServerProcess, name: string) =>
    createInterface({ input: p.child.stdout! }).on("line", (line) => {
      if (!line.startsWith("{")) return
      const level = (JSON.parse(line) as { level?: number }).level ?? 0
      if (level >= 40 && problems.length < 20) problems.push(`${name}: ${line.slice(0, 300)}`)
    })

  let api: ServerProcess | undefined
  let runtime: ServerProcess | undefined
  let nc: NatsConnection | undefined
  let echo: NatsConnection | undefined
  let closeStream: (() => void) | undefined
  const decisions: Decision[] = []
  let bare: number[] = []
  let ping: number[] = []
  const insert: number[] = []
  let pendingAt = 0
  let runId = 0
  try {
    // The api process migrates the fresh database; the runtime starts once it has.
    api = await startProcess(["--import", "tsx", "src/main/main.ts", "serve", "--role", "api"], env)
    watch(api, "api")
    runtime = await startProcess(["--import", "tsx", "src/main/main.ts", "serve", "--role", "runtime"], env)
    watch(runtime, "runtime")
    const base = `http://127.0.0.1:${api.port}`

    nc = await connect({ servers: natsUrl, name: "bench-approvals" })
    echo = await connect({ servers: natsUrl, name: "bench-approvals-echo" })
    echo.subscribe(`${ns}.bench.echo`, { callback: (_err, msg) => void msg.respond() })
    await echo.flush()

    // ---- a funded workspace and a run of callees who all ask for a discount ----
    const email = `bench-appr-${randomBytes(4).toString("hex")}@example.com`
    const password = "correct horse battery staple"
    await ok(base, "POST", "/auth/signup", { email, password, country: "US", full_name: "Bench Approvals" })
    await verifyEmail(base, env.OUTBOX_FILE, email)
    const login = await ok(base, "POST", "/auth/login", { email, password })
    const token = login.token as string
    const tenantId = (login.tenant as { id: number }).id
    const intent = await ok(base, "POST", "/billing/topup", { amount_minor: 10_000_000 }, token)
    await ok(base, "POST", "/billing/webhooks/stub", { external_id: intent.external_id, status: "succeeded" })
    const w = await ok(
      base,
      "POST",
      "/api/workflows",
      { nl_prompt: "Win back lapsed members with a discount of up to $20; book callbacks; escalate when asked." },
      token,
    )
    await ok(base, "PUT", `/api/workflows/${w.id}`, { max_call_seconds: 1800 }, token)
    // Distinct valid US numbers (415-2xx-xxx7): the sim's callee ending in 7 asks for a discount.
    const rows = Array.from({ length: N + WARMUP }, (_, i) => ({
      phone: `+1415${2_000_000 + i * 10 + 7}`,
      name: `Person ${i}`,
    }))
    await ok(base, "POST", `/api/workflows/${w.id}/audience`, { rows }, token)
    await ok(
      base,
      "PUT",
      `/api/workflows/${w.id}/compliance`,
      { consent_attestation_text: "All numbers opted in on our website." },
      token,
    )

    // Who is waiting for what: by call (turns) and by approval (the bus).
    const byCall = new Map<number, Decision>()
    const byApproval = new Map<number, Decision>()
    const onTurn = (t: Turn, at: number, via: "nats" | "sse") => {
      const d = t.call_id === null ? undefined : byCall.get(t.call_id)
      if (d === undefined) return
      if (via === "sse") {
        if (Number.isNaN(d.tSse) && t.speaker === "agent" && t.turn_index >= d.fromIndex) {
          d.tSse = at
          if (!Number.isNaN(d.t1)) d.done()
        }
        return
      }
      if (Number.isNaN(d.t1) && t.speaker === "agent" && t.turn_index >= d.fromIndex) {
        d.t1 = at
        d.at = Date.parse(t.at)
        d.text = t.text
        d.index = t.turn_index
        if (!Number.isNaN(d.tSse)) d.done()
      } else if (!Number.isNaN(d.t1) && Number.isNaN(d.calleeAt) && t.speaker === "callee" && t.turn_index > d.index)
        d.calleeAt = Date.parse(t.at)
    }
    nc.subscribe(`${ns}.turns.${tenantId}.>`, { callback: (_err, msg) => onTurn(msg.json<Turn>(), now(), "nats") })
    nc.subscribe(`${ns}.rt.approval.decided`, {
      callback: (_err, msg) => {
        const t = now()
        const d = byApproval.get(msg.json<{ approval_id: number }>().approval_id)
        if (d !== undefined && Number.isNaN(d.tBus)) d.tBus = t
      },
    })
    await nc.flush()

    const run = await ok(base, "POST", `/api/workflows/${w.id}/run`, undefined, token)
    runId = run.run_id as number
    const tRun = now()
    closeStream = await openTurnStream(base, runId, token, (t, at) => onTurn(t, at, "sse"))

    // ---- every call holding for its decision ----
    type Pending = { id: number; call_id: number; context: { turns: number } }
    let pending: Pending[] = []
    for (const deadline = now() + 60_000; now() < deadline; await sleep(250)) {
      pending = (await ok(base, "GET", `/api/approvals?workflow_id=${w.id}&status=pending&limit=500`, undefined, token))
        .approvals as Pending[]
      if (pending.length >= N + WARMUP) break
    }
    pendingAt = (now() - tRun) / 1000
    process.stdout.write(`${pending.length} pending approvals ${f1(pendingAt)} s after POST run\n`)
    if (pending.length < N + WARMUP)
      throw new Error(`only ${pending.length} of ${N + WARMUP} calls proposed a concession within 60 s`)

    // ---- the baselines, before and after the decisions ----
    bare = await roundTrips(nc, `${ns}.bench.echo`, ROUND_TRIPS / 2)
    ping = await roundTrips(nc, `${ns}.rt.ping`, ROUND_TRIPS / 2)

    // ---- decide each, one at a time, oldest first ----
    // The runtime stamps a turn's `at` with Date.now(); this process measures on its monotonic clock.
    const skew = Date.now() - now()
    pending.sort((a, b) => a.id - b.id)
    for (const [i, a] of pending.slice(0, N + WARMUP).entries()) {
      let done!: () => void
      const finished = new Promise<void>((r) => (done = r))
      const d: Decision = {
        approvalId: a.id,
        callId: a.call_id,
        fromIndex: a.context.turns,
        tReq: NaN,
        t0: NaN,
        status: 0,
        tBus: NaN,
        t1: NaN,
        at: NaN,
        text: "",
        index: -1,
        tSse: NaN,
        calleeAt: NaN,
        done,
      }
      byCall.set(a.call_id, d)
      byApproval.set(a.id, d)
      d.tReq = now()
      const r = await http(base, "POST", `/api/approvals/${a.id}/decide`, { decision: "approve" }, token)
      d.t0 = r.at
      d.status = r.status
      await Promise.race([finished, sleep(3000)])
      d.at -= skew
      if (i >= WARMUP) decisions.push(d)
      await sleep(Math.random() * GAP_MS)
    }
    // Late callee lines of the last calls.
    await sleep(500)

    bare = [...bare, ...(await roundTrips(nc, `${ns}.bench.echo`, ROUND_TRIPS / 2))]
    ping = [...ping, ...(await roundTrips(nc, `${ns}.rt.ping`, ROUND_TRIPS / 2))]

    // What the TurnSink's store costs without its wait: the same one-row unnest insert into the
    // same table (indexes, WAL, commit), from here; seqs far past the run's, no call.
    for (let i = 0; i < ROUND_TRIPS / 2; i++) {
      const t = performance.now()
      await sql`
        insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
        select * from unnest(
          ${[tenantId]}::bigint[], ${[runId]}::bigint[], ${[0]}::bigint[], ${[null]}::bigint[],
          ${[1_000_000_000 + i]}::bigint[], ${[i]}::int[],
          ${["agent"]}::text[], ${["Good news: I can take $20.00 off for you. Shall we go ahead?"]}::text[],
          ${[new Date().toISOString()]}::timestamptz[])
        on conflict do nothing`
      insert.push(performance.now() - t)
    }
  } finally {
    closeStream?.()
    await nc?.close().catch(() => {})
    await echo?.close().catch(() => {})
    await runtime?.stop()
    await api?.stop()
    agent.destroy()
    await scratch.drop()
  }

  // ---- the report ----
  const got = decisions.filter((d) => d.status === 200 && !Number.isNaN(d.t1))
  const missing = decisions.length - got.length
  const offers = got.filter((d) => /take .+ off/i.test(d.text)).length
  const sample = got.find((d) => /take .+ off/i.test(d.text))?.text ?? got[0]?.text ?? "—"
  const speechMs = (text: string) =>
    ((text.split(/\s+/).filter((x) => x !== "").length * 1000) / WORDS_PER_SECOND) * SCALE
  const headline = stats(got.map((d) => d.t1 - d.t0))
  const bareS = stats(bare)
  const pingS = stats(ping)
  const insertS = stats(insert)
  const split = {
    request: stats(got.map((d) => d.t0 - d.tReq)),
    bus: stats(got.map((d) => d.tBus - d.tReq)),
    busBeforeResponse: got.filter((d) => d.tBus < d.t0).length,
    runtime: stats(got.map((d) => d.at - d.tBus)),
    sink: stats(got.map((d) => d.t1 - d.at)),
    fromClick: stats(got.map((d) => d.t1 - d.tReq)),
    sse: stats(got.filter((d) => !Number.isNaN(d.tSse)).map((d) => d.tSse - d.t0)),
    sseHop: stats(got.filter((d) => !Number.isNaN(d.tSse)).map((d) => d.tSse - d.t1)),
    speech: stats(got.map((d) => speechMs(d.text))),
    spoken: stats(got.filter((d) => !Number.isNaN(d.calleeAt)).map((d) => d.calleeAt - d.at)),
  }
  const row = (label: string, s: Stats, note = "") =>
    `| ${label} | ${f2(s.p50)} | ${f2(s.p99)} | ${f2(s.max)} | ${note} |`
  // The part of the runtime → bench stretch that is neither the store nor the bus: the batch's wait.
  const batchWait = split.sink.p50 - insertS.p50 - bareS.p50 / 2

  const md =
    `## approvals — decision's HTTP response → the agent's resumed line, api and runtime in two processes\n\n` +
    `Machine: ${machine()}; PostgreSQL ${pg.version} and NATS on the same machine (scratch database, unique ` +
    `BUS_NAMESPACE). Run ${new Date().toISOString().slice(0, 10)}; 1-minute load average ` +
    `${loadBefore.toFixed(1)} before and ${loadavg()[0]!.toFixed(1)} after (the machine is shared).\n` +
    `Two processes, \`src/main/main.ts serve --role api\` and \`--role runtime\` (LOG_LEVEL=info, DB_POOL_MAX ` +
    `10), SIM_TIME_SCALE ${SCALE}, CALLING_HOURS=any, CPS limits 1000, APPROVAL_HOLD_MS ` +
    `${env.APPROVAL_HOLD_MS} (calls hold for their decision), the workflow's max_call_seconds 1800. The bench ` +
    `signs up over HTTP, funds the workspace, and runs ${N + WARMUP} callees ending in 7 (each asks for a ` +
    `discount; the agent proposes a concession, says a holding line and waits); all ${N + WARMUP} approvals ` +
    `were pending ${f1(pendingAt)} s after POST run. Then it approves them one at a time, oldest first, over ` +
    `one keep-alive connection (node:http): **t0** = the last byte of the 200 from \`POST ` +
    `/api/approvals/{id}/decide\`; **t1** = the resumed agent turn (the first agent turn of that call from the ` +
    `index after the holding line) arriving at the bench on its own NATS subscription to \`turns.<tenant>.>\`. ` +
    `The next decision follows 0–${GAP_MS} ms after t1. The first ${WARMUP} decisions are not counted; ` +
    `${got.length} of ${decisions.length} measured decisions got their resumed ` +
    `turn${missing > 0 ? ` (**${missing} did not within 3 s**)` : ""}, ${offers} of them the concession (e.g. ` +
    `"${sample}").\n\n` +
    `**Decision's HTTP response → agent's resumed line on the bus: p50 ${f2(headline.p50)} ms, p99 ` +
    `${f2(headline.p99)} ms, max ${f2(headline.max)} ms** (n = ${headline.n}); ` +
    `**${f1(headline.p50 / pingS.p50)}× the runtime's \`rt.ping\` round trip** (p50 ${f2(pingS.p50)} ms) and ` +
    `${f1(headline.p50 / bareS.p50)}× a bare NATS request/reply (p50 ${f2(bareS.p50)} ms).\n\n` +
    `| stretch (ms, over ${headline.n} decisions) | p50 | p99 | max | |\n` +
    `|---|---:|---:|---:|---|\n` +
    `${row("**t1 − t0: response → resumed line at the bench (NATS)**", headline, "the figure")}\n` +
    `${row("t1 − request sent: the click → resumed line", split.fromClick)}\n` +
    row("decide request: sent → response (t0)", split.request, "auth, conditional update in Postgres, publish, reply") +
    `\n` +
    row(
      "sent → `rt.approval.decided` at the bench",
      split.bus,
      `on the bus before the response arrived in ${split.busBeforeResponse} of ${headline.n}`,
    ) +
    `\n` +
    row(
      "runtime: `rt.approval.decided` → resumed line produced (its `at`)",
      split.runtime,
      "call actor → conversation → model (sim) → turn; `at` has whole-ms resolution",
    ) +
    `\n` +
    row(
      "runtime → bench: line produced → on the bus at the bench",
      split.sink,
      "TurnSink: insert (batched only behind one in flight), publish",
    ) +
    `\n` +
    row(
      "response → the same line over SSE from the api process",
      split.sse,
      `\`GET /api/runs/{id}/turns/stream\` (n = ${split.sse.n})`,
    ) +
    `\n${row("SSE after the bench's own NATS copy", split.sseHop, "the api process's fan-out")}\n\n` +
    `| baseline (ms) | p50 | p99 | max | |\n` +
    `|---|---:|---:|---:|---|\n` +
    row(
      "bare NATS request/reply: bench → a responder on a second connection in the bench",
      bareS,
      `${bareS.n} sequential, half before and half after the decisions`,
    ) +
    `\n` +
    `${row("`rt.ping` request/reply: bench → the runtime process", pingS, `${pingS.n} sequential, likewise`)}\n` +
    row(
      "one-row `unnest` insert into `turns` (as the TurnSink writes it), from the bench",
      insertS,
      `${insertS.n} sequential: the store without the wait`,
    ) +
    `\n\nSpeech is not in the figure: the resumed line takes ${f1(split.speech.p50)} ms to speak at this scale ` +
    `(p50 of words ÷ ${WORDS_PER_SECOND}/s × ${SCALE}), and the callee's next line began ` +
    `${f1(split.spoken.p50)} ms (p50) after the agent's line's \`at\`, yet the line reached the bench ` +
    `${f2(split.sink.p50)} ms after its \`at\`: a turn is stored and published while it is being spoken, not ` +
    `after.\n` +
    `Where the time goes: of the ${f2(split.sink.p50)} ms from the line to the bench (p50), the Postgres ` +
    `insert is ~${f2(insertS.p50)} ms and the bus hop ~${f2(bareS.p50 / 2)} ms, leaving **~${f1(batchWait)} ` +
    `ms** for the TurnSink to start the insert (it stores a turn as soon as no insert is in flight, and ` +
    `batches only what arrives during one) and for the event loop to get to each step: ` +
    `${f1((100 * batchWait) / headline.p50)}% of the p50.`
  process.stdout.write(`\n${md}\n`)
  if (problems.length > 0) process.stdout.write(`warnings and errors logged:\n${problems.join("\n")}\n`)
  record("approvals", md)
}
