// The Fastify baseline for bench/reads: Fastify 5 answering each GET with the bytes Parley answered
// for that path (read once from READS_BODIES), from memory, with its logger off.
import { readFileSync } from "node:fs"
import Fastify from "fastify"

const bodies = new Map(
  Object.entries(JSON.parse(readFileSync(process.env.READS_BODIES!, "utf8")) as Record<string, string>),
)
const app = Fastify({ logger: false })
app.get("/*", (req, reply) => {
  const body = bodies.get(req.url)
  if (body === undefined) return reply.code(404).send()
  return reply.type("application/json; charset=utf-8").send(body)
})
const address = await app.listen({ host: "127.0.0.1", port: Number(process.env.PORT ?? 0) })
process.stdout.write(`${JSON.stringify({ msg: "parley started", port: Number(new URL(address).port) })}\n`)
