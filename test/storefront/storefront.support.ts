// A local fake shop for the storefront tests: the token exchange and a paged customers list,
// recording what it was asked.
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"

export interface FakeShop {
  readonly url: string
  readonly exchanges: Array<Record<string, unknown>>
  readonly reads: Array<{ path: string; token: string | undefined }>
  /** The codes the shop accepts (once each), and the token each gives. */
  readonly codes: Map<string, string>
  /** Every token the shop has issued (and still honours). */
  readonly tokens: Set<string>
  /** Customers the shop has (served two pages at a time of `pageSize`). */
  customers: Array<Record<string, unknown>>
  pageSize: number
  close(): Promise<void>
}

const bodyOf = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let s = ""
    req.on("data", (c) => {
      s += c
    })
    req.on("end", () => resolve(s))
  })

export async function startFakeShop(): Promise<FakeShop> {
  const shop: Omit<FakeShop, "url" | "close"> = {
    exchanges: [],
    reads: [],
    codes: new Map(),
    tokens: new Set(),
    customers: [],
    pageSize: 3,
  }
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://fake")
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers })
      res.end(JSON.stringify(body))
    }
    if (req.method === "POST" && url.pathname === "/admin/oauth/access_token") {
      const body = JSON.parse(await bodyOf(req)) as Record<string, unknown>
      shop.exchanges.push(body)
      const token = shop.codes.get(String(body.code))
      if (token === undefined) return send(400, { error: "invalid_request" })
      shop.codes.delete(String(body.code))
      shop.tokens.add(token)
      return send(200, { access_token: token, scope: "read_customers,read_orders" })
    }
    if (req.method === "GET" && url.pathname === "/admin/api/2024-01/customers.json") {
      const token = req.headers["x-shopify-access-token"] as string | undefined
      shop.reads.push({ path: url.pathname + url.search, token })
      if (token === undefined || !shop.tokens.has(token)) return send(401, { errors: "unauthorized" })
      const page = Number(url.searchParams.get("page_info") ?? "0")
      const slice = shop.customers.slice(page * shop.pageSize, (page + 1) * shop.pageSize)
      const more = (page + 1) * shop.pageSize < shop.customers.length
      const link: Record<string, string> = more
        ? { link: `<${base}/admin/api/2024-01/customers.json?limit=250&page_info=${page + 1}>; rel="next"` }
        : {}
      return send(200, { customers: slice }, link)
    }
    send(404, { errors: "not found" })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return Object.assign(shop, {
    url: base,
    close: () => new Promise<void>((r) => server.close(() => r())),
  })
}
