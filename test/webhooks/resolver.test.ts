// How the address guard resolves names (src/providers/outbound.ts): A and AAAA through c-ares against
// the name server (here a local one), never getaddrinfo on libuv's thread pool, so a name server that
// never answers neither holds the pool's threads nor a lookup past its bound; "localhost" and IP
// literals resolve without asking any name server.
import { pbkdf2 } from "node:crypto"
import { createSocket, type Socket } from "node:dgram"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { addressAllowed, lookupHost, setNameServers } from "../../src/providers/outbound.js"
import { webhookUrlRefusal } from "../../src/webhooks/url-policy.js"

/** IPv6 text to its 16 bytes (the "::" run expanded). */
function v6Bytes(address: string): Buffer {
  const [head, tail] = address.split("::") as [string, string | undefined]
  const part = (s: string | undefined) => (s === undefined || s === "" ? [] : s.split(":"))
  const h = part(head)
  const t = part(tail)
  const groups = [...h, ...Array(8 - h.length - t.length).fill("0"), ...t]
  const out = Buffer.alloc(16)
  for (const [i, g] of groups.entries()) out.writeUInt16BE(Number.parseInt(g, 16), i * 2)
  return out
}

/**
 * A name server on 127.0.0.1: answers A (type 1) and AAAA (type 28) from `zone`, NOERROR with no
 * answer for a type a name lacks, NXDOMAIN for a name it does not know, and nothing at all for
 * `silent` names. Counts the questions it was asked.
 */
async function startNameServer(zone: Record<string, { a?: string[]; aaaa?: string[] }>, silent: Set<string>) {
  const asked: Array<{ name: string; type: number }> = []
  const socket: Socket = createSocket("udp4")
  socket.on("message", (msg, from) => {
    let at = 12
    const labels: string[] = []
    while (msg[at]! !== 0) {
      const n = msg[at]!
      labels.push(msg.subarray(at + 1, at + 1 + n).toString("ascii"))
      at += n + 1
    }
    at += 1
    const name = labels.join(".").toLowerCase()
    const type = msg.readUInt16BE(at)
    const question = msg.subarray(12, at + 4)
    asked.push({ name, type })
    if (silent.has(name)) return
    const entry = zone[name]
    const rdata =
      entry === undefined
        ? []
        : type === 1
          ? (entry.a ?? []).map((a) => Buffer.from(a.split(".").map(Number)))
          : type === 28
            ? (entry.aaaa ?? []).map(v6Bytes)
            : []
    const header = Buffer.alloc(12)
    header.writeUInt16BE(msg.readUInt16BE(0), 0)
    header.writeUInt16BE(entry === undefined ? 0x8183 : 0x8180, 2) // response, recursion; NXDOMAIN or NOERROR
    header.writeUInt16BE(1, 4)
    header.writeUInt16BE(rdata.length, 6)
    const answers = rdata.map((r) => {
      const rr = Buffer.alloc(12)
      rr.writeUInt16BE(0xc00c, 0) // the question's name
      rr.writeUInt16BE(type, 2)
      rr.writeUInt16BE(1, 4) // IN
      rr.writeUInt32BE(60, 6)
      rr.writeUInt16BE(r.length, 10)
      return Buffer.concat([rr, r])
    })
    socket.send(Buffer.concat([header, question, ...answers]), from.port, from.address)
  })
  await new Promise<void>((r) => socket.bind(0, "127.0.0.1", r))
  return {
    server: `127.0.0.1:${socket.address().port}`,
    asked,
    close: () => new Promise<void>((r) => socket.close(() => r())),
  }
}

describe("name resolution for guarded connections", () => {
  let ns: Awaited<ReturnType<typeof startNameServer>>

  beforeAll(async () => {
    ns = await startNameServer(
      {
        "both.example.test": { a: ["93.184.216.34"], aaaa: ["2606:2800:220:1:248:1893:25c8:1946"] },
        "v4only.example.test": { a: ["93.184.216.35"] },
        "v6inside.example.test": { a: ["93.184.216.36"], aaaa: ["fd00::1"] },
      },
      new Set(["silent.example.test"]),
    )
    setNameServers([ns.server])
  })
  afterEach(() => {
    ns.asked.length = 0
  })
  afterAll(async () => {
    setNameServers(undefined)
    await ns?.close()
  })

  it("asks for A and AAAA and keeps both answers", async () => {
    expect(await lookupHost("both.example.test")).toEqual({
      addresses: ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
      timedOut: false,
    })
    expect(ns.asked.map((q) => q.type).sort()).toEqual([1, 28])
    expect(await lookupHost("v4only.example.test")).toEqual({ addresses: ["93.184.216.35"], timedOut: false })
    expect(await lookupHost("nowhere.example.test")).toEqual({ addresses: [], timedOut: false })
  })

  it("refuses a name whose AAAA answer is private though its A answer is public", async () => {
    const found = await lookupHost("v6inside.example.test")
    expect(found.addresses).toContain("fd00::1")
    expect(found.addresses.filter((a) => !addressAllowed(a, "public"))).toEqual(["fd00::1"])
    const refused = await webhookUrlRefusal("https://v6inside.example.test/h", { allowPrivateProviderUrls: false })
    expect(refused).toEqual({
      reason: "must name a host with public addresses only (v6inside.example.test resolves to a non-public address)",
      address: "fd00::1",
    })
    expect(await webhookUrlRefusal("https://both.example.test/h", { allowPrivateProviderUrls: false })).toBeUndefined()
  })

  it('resolves "localhost" and IP literals without asking a name server', async () => {
    expect(await lookupHost("localhost")).toEqual({ addresses: ["127.0.0.1", "::1"], timedOut: false })
    expect(await lookupHost("hooks.localhost")).toEqual({ addresses: ["127.0.0.1", "::1"], timedOut: false })
    expect(await lookupHost("203.0.113.7")).toEqual({ addresses: ["203.0.113.7"], timedOut: false })
    expect(await lookupHost("[2606:4700:4700::1111]")).toEqual({
      addresses: ["2606:4700:4700::1111"],
      timedOut: false,
    })
    expect(ns.asked).toEqual([])
  })

  it("a name server that never answers holds no thread-pool thread, and each lookup ends timed out", async () => {
    // More lookups than the pool has threads (4): getaddrinfo would hold all of them.
    let settled = 0
    const lookups = Array.from({ length: 8 }, () =>
      lookupHost("silent.example.test").finally(() => {
        settled++
      }),
    )
    // Work that needs the pool (as argon2 and file I/O do) finishes while every lookup still waits.
    const poolWork = Array.from(
      { length: 4 },
      () =>
        new Promise<void>((resolve, reject) =>
          pbkdf2("pw", "salt", 1000, 32, "sha256", (e) => (e ? reject(e) : resolve())),
        ),
    )
    await Promise.all(poolWork)
    expect(settled).toBe(0)
    expect(ns.asked.some((q) => q.name === "silent.example.test")).toBe(true)
    for (const found of await Promise.all(lookups)) expect(found).toEqual({ addresses: [], timedOut: true })
  }, 15_000)
})
