// The uWS baseline for bench/reads: a bare uWebSockets.js server answering each GET with the bytes
// Parley answered for that path (read once from READS_BODIES), with no auth, routing or logging.
import { readFileSync } from "node:fs"
import { loadUws } from "../../api/uws.js"

const bodies = new Map(
  Object.entries(JSON.parse(readFileSync(process.env.READS_BODIES!, "utf8")) as Record<string, string>),
)
const uws = loadUws()
uws
  .App()
  .get("/*", (res, req) => {
    const q = req.getQuery()
    const body = bodies.get(q ? `${req.getUrl()}?${q}` : req.getUrl())
    res.cork(() => {
      if (body === undefined) res.writeStatus("404 Not Found").end()
      else res.writeStatus("200 OK").writeHeader("Content-Type", "application/json; charset=utf-8").end(body)
    })
  })
  .listen("127.0.0.1", Number(process.env.PORT ?? 0), (socket) => {
    if (!socket) process.exit(1)
    process.stdout.write(`${JSON.stringify({ msg: "parley started", port: uws.us_socket_local_port(socket) })}\n`)
  })
