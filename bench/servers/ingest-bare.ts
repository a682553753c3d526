// The baseline for bench/turns' ingestion: a bare uWebSockets.js POST handler that reads the
// body, parses it (an object or an array), gives each turn the next seq from a counter in memory
// and answers 201 with the turns as JSON: no auth, validation, database or bus.
import { loadUws } from "../../api/uws.js"

const uws = loadUws()
let seq = 0

uws
  .App()
  .post("/*", (res) => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    const parts: Buffer[] = []
    res.onData((chunk, last) => {
      parts.push(Buffer.from(chunk.slice(0)))
      if (!last || aborted) return
      let body: unknown
      try {
        body = JSON.parse(Buffer.concat(parts).toString("utf8"))
      } catch {
        res.cork(() => res.writeStatus("400 Bad Request").end())
        return
      }
      const items = (Array.isArray(body) ? body : [body]) as Array<Record<string, unknown>>
      const out = items.map((t) => ({ ...t, turn_id: ++seq, seq, turn_index: t.seq, duplicate: false }))
      const json = JSON.stringify(Array.isArray(body) ? { turns: out } : out[0])
      res.cork(() => res.writeStatus("201 Created").writeHeader("Content-Type", "application/json").end(json))
    })
  })
  .listen("127.0.0.1", Number(process.env.PORT ?? 0), (socket) => {
    if (!socket) process.exit(1)
    process.stdout.write(`${JSON.stringify({ msg: "parley started", port: uws.us_socket_local_port(socket) })}\n`)
  })

for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => process.exit(0))
