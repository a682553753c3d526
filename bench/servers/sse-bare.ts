// The baseline for bench/sse: a bare uWebSockets.js fan-out of the same turns from the same NATS
// subject: no routing, auth, database or per-client state; each event-loop turn's events are
// framed once and written to every client in its own cork, with no backpressure handling at all.
// BARE_FANOUT=event writes each event to every client as it arrives instead.
import { connect } from "@nats-io/transport-node"
import { type HttpResponse, loadUws } from "../../api/uws.js"

const subject = process.env.BARE_SUBJECT ?? "bench.bare.>"
const perEvent = process.env.BARE_FANOUT === "event"

const uws = loadUws()
const clients = new Set<HttpResponse>()
let pending: string[] = []
let scheduled = false

function writeAll(bytes: Buffer): void {
  for (const res of clients) res.cork(() => res.write(bytes))
}

function flush(): void {
  scheduled = false
  const bytes = Buffer.from(pending.join(""))
  pending = []
  writeAll(bytes)
}

const nc = await connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", name: "bench-sse-bare" })
nc.subscribe(subject, {
  callback: (err, msg) => {
    if (err) return
    const body = msg.string()
    // The seq is the SSE id, as Parley sends it; one parse per event, not per client.
    const event = `id: ${(JSON.parse(body) as { seq: number }).seq}\ndata: ${body}\n\n`
    if (perEvent) return writeAll(Buffer.from(event))
    pending.push(event)
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  },
})
await nc.flush()

uws
  .App()
  .get("/*", (res) => {
    res.onAborted(() => clients.delete(res))
    res.cork(() => {
      res
        .writeStatus("200 OK")
        .writeHeader("Content-Type", "text/event-stream; charset=utf-8")
        .writeHeader("Cache-Control", "no-cache")
        .write("retry: 2000\n\n")
    })
    clients.add(res)
  })
  .listen("127.0.0.1", Number(process.env.PORT ?? 0), (socket) => {
    if (!socket) process.exit(1)
    process.stdout.write(`${JSON.stringify({ msg: "parley started", port: uws.us_socket_local_port(socket) })}\n`)
  })

for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => process.exit(0))
