// The baseline for bench/http: a bare uWebSockets.js server answering every GET with the same
// bytes /pricing returns, with no routing, validation, effects or logging.
import { loadUws } from "../../api/uws.js"
import { priceCatalogue } from "../../src/billing/pricing.js"

const body = JSON.stringify(priceCatalogue())
const uws = loadUws()
uws
  .App()
  .get("/*", (res) => {
    res.cork(() => {
      res.writeStatus("200 OK").writeHeader("Content-Type", "application/json; charset=utf-8").end(body)
    })
  })
  .listen("127.0.0.1", Number(process.env.PORT ?? 0), (socket) => {
    if (!socket) process.exit(1)
    process.stdout.write(`${JSON.stringify({ msg: "parley started", port: uws.us_socket_local_port(socket) })}\n`)
  })
