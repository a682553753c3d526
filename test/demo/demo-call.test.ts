// POST /demo/call and GET /demo/feed through the real server and its runtime (sim carrier): a call
// end to end (queued → ringing → answered → turns → ended, seqs increasing, `after`, masked text),
// billed to nobody; the per-IP and per-number caps and the cool-down (429 + Retry-After); the 422s
// (a bad number, a DNC'd or registered one); expired and unknown tokens (404, fast clock).
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { demoFeed } from "../../src/demo/demo.feed.js"
import { Clock } from "../../src/platform/Clock.js"
import { FAST_RUNTIME_ENV } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { type Feed, feedOf, postCall, waitDone } from "./demo.support.js"

const PER_IP = 3
const PER_NUMBER = 1

let srv: TestServer
beforeAll(async () => {
  srv = await startTestServer({
    env: {
      ...FAST_RUNTIME_ENV,
      // Each test speaks from its own address, as the proxy in front would say.
      TRUSTED_PROXIES: "127.0.0.1",
      DEMO_CALLS_PER_IP_DAY: String(PER_IP),
      DEMO_CALLS_PER_NUMBER_DAY: String(PER_NUMBER),
    },
  })
})
afterAll(async () => srv?.stop())

let ipSeq = 0
const nextIp = () => `203.0.113.${++ipSeq}`
let numberSeq = 0
/** A fresh US number ending in `digit` (the sim callee's behaviour). */
const nextNumber = (digit: number) => `+1202555${String(1000 + ++numberSeq * 10 + digit).slice(-4)}`

const demoTenant = async () =>
  (await srv.sql<[{ tenant_id: number }]>`select tenant_id from demo_workspace`)[0].tenant_id

describe("a demo call, end to end", () => {
  let token: string
  let done: Feed
  let phone: string

  it("answers 202 queued with a feed token; the feed shows queued → ringing → answered → turns → ended", async () => {
    phone = nextNumber(3)
    const res = await postCall(srv, { phone, name: "Sam" }, nextIp())
    const body = (await res.json()) as { call_id: number; status: string; feed_token: string; expires_at: string }
    expect(res.status, JSON.stringify(body)).toBe(202)
    expect(body).toMatchObject({ call_id: expect.any(Number), status: "queued" })
    // 256 random bits in base64url: at least 128 bits, as the spec asks.
    expect(body.feed_token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(Date.parse(body.expires_at) - Date.now()).toBeGreaterThan(3590_000)
    token = body.feed_token

    const first = await feedOf(srv, token)
    expect(first.status).toBe(200)
    expect(first.body.events[0]).toMatchObject({ seq: 1, kind: "queued" })

    done = await waitDone(srv, token)
    const kinds = done.events.map((e) => e.kind)
    expect(kinds.slice(0, 3)).toEqual(["queued", "ringing", "answered"])
    expect(kinds.at(-1)).toBe("ended")
    const turns = done.events.filter((e) => e.kind === "turn")
    expect(turns.length).toBeGreaterThanOrEqual(3)
    expect(kinds.slice(3, -1).every((k) => k === "turn")).toBe(true)
    const seqs = done.events.map((e) => e.seq)
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!)
    // The agent speaks first, with the demo's script, by the visitor's name and from the demo workspace.
    expect(turns[0]).toMatchObject({ speaker: "agent", text: expect.stringContaining("automated demo call") })
    expect(turns.map((t) => t.text).join(" ")).toMatch(/Hi Sam, this is Anya from Parley/)
    expect(turns.some((t) => t.speaker === "callee")).toBe(true)
    expect(done.events.at(-1)).toMatchObject({ kind: "ended", outcome: "agreed", text: expect.any(String) })
    // The callee's number appears nowhere in the feed.
    expect(JSON.stringify(done)).not.toContain(phone.slice(2))
  })

  it("filters by after: only later events, and nothing after the end", async () => {
    const third = done.events[2]!.seq
    const later = await feedOf(srv, token, third)
    expect(later.body.events.map((e) => e.seq)).toEqual(done.events.slice(3).map((e) => e.seq))
    expect(later.body.done).toBe(true)
    const last = done.events.at(-1)!.seq
    expect((await feedOf(srv, token, last)).body).toEqual({ events: [], done: true })
    // The same read twice numbers everything the same.
    expect((await feedOf(srv, token)).body).toEqual(done)
  })

  it("masks the phone numbers and emails a callee says", async () => {
    // A callee reading out their details, stored as the runtime stores a turn of this call.
    const [row] = await srv.sql<[{ run_id: number; call_id: number; tenant_id: number; target_id: number }]>`
      select c.run_id, c.id as call_id, c.tenant_id, c.target_id
      from demo_calls d join calls c on c.run_id = d.run_id where d.id = (select max(id) from demo_calls)`
    const turnSeq = Math.max(...done.events.filter((e) => e.kind === "turn").map((e) => e.seq - 3)) + 1
    await srv.sql`
      insert into turns (tenant_id, run_id, target_id, call_id, seq, turn_index, speaker, text, at)
      values (${row.tenant_id}, ${row.run_id}, ${row.target_id}, ${row.call_id}, ${turnSeq}, 900, 'callee',
        'Mail me at sam.lee@example.com or ring +1 (202) 555-0199, or nine eight seven six five four three two one.',
        now())`
    const res = await feedOf(srv, token, turnSeq + 3 - 1)
    const said = res.body.events[0]!
    expect(said).toMatchObject({ seq: turnSeq + 3, kind: "turn", speaker: "callee" })
    expect(said.text).toBe("Mail me at s***@***.com or ring +* (***) ***-**99, or ***.")
    expect(res.body.events.at(-1)!.kind).toBe("ended")
  })

  it("ran as a run of the demo workspace, dialled once, and billed nobody", async () => {
    const tenant = await demoTenant()
    const [run] = await srv.sql<[{ tenant_id: number; status: string; attempts: number; phone_e164: string }]>`
      select r.tenant_id, r.status, t.attempts, t.phone_e164
      from demo_calls d join runs r on r.id = d.run_id join run_targets t on t.run_id = r.id
      where d.id = (select max(id) from demo_calls)`
    expect(run).toMatchObject({ tenant_id: tenant, attempts: 1, phone_e164: phone })
    const deadline = Date.now() + 10_000
    let status = run.status
    while (status === "running" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100))
      ;[{ status }] = await srv.sql<[{ status: string }]>`
        select r.status from demo_calls d join runs r on r.id = d.run_id where d.id = (select max(id) from demo_calls)`
    }
    expect(status).toBe("completed")
    const [money] = await srv.sql<[{ reservations: number; wallets: number }]>`
      select (select count(*)::int from usage_reservations where tenant_id = ${tenant}) as reservations,
             (select count(*)::int from wallets where tenant_id = ${tenant}) as wallets`
    expect(money).toEqual({ reservations: 0, wallets: 0 })
    // Only the feed token's hash is kept.
    const [stored] = await srv.sql<[{ n: number }]>`
      select count(*)::int as n from demo_calls where feed_token_sha256 = sha256(convert_to(${token}, 'UTF8'))`
    expect(stored.n).toBe(1)
  })

  it("a busy line is not dialled again", async () => {
    const res = await postCall(srv, { phone: nextNumber(1) }, nextIp())
    expect(res.status).toBe(202)
    const feed = await waitDone(srv, ((await res.json()) as { feed_token: string }).feed_token)
    expect(feed.events.map((e) => e.kind)).toEqual(["queued", "ringing", "ended"])
    expect(feed.events.at(-1)).toMatchObject({ outcome: "busy", text: "The line was busy." })
    const [t] = await srv.sql<[{ status: string; attempts: number }]>`
      select t.status, t.attempts from demo_calls d join run_targets t on t.run_id = d.run_id
      where d.id = (select max(id) from demo_calls)`
    expect(t).toEqual({ status: "done", attempts: 1 })
  })
})

describe("caps", () => {
  const refused = async (res: Response, says: RegExp) => {
    const body = (await res.json()) as { code: string; error: string; retry_after_seconds: number }
    expect(res.status, JSON.stringify(body)).toBe(429)
    const retryAfter = Number(res.headers.get("retry-after"))
    expect(body).toMatchObject({ code: "RATE_LIMITED", retry_after_seconds: retryAfter })
    expect(body.error).toMatch(says)
    return retryAfter
  }

  it("per client IP a day: 429 with Retry-After past DEMO_CALLS_PER_IP_DAY", async () => {
    const ip = nextIp()
    for (let i = 0; i < PER_IP; i++) expect((await postCall(srv, { phone: nextNumber(0) }, ip)).status).toBe(202)
    const before = (await srv.sql<[{ n: number }]>`select count(*)::int as n from demo_calls`)[0].n
    const wait = await refused(await postCall(srv, { phone: nextNumber(0) }, ip), /a day from one address/)
    expect(wait).toBeGreaterThan(86_000)
    expect(wait).toBeLessThanOrEqual(86_400)
    expect((await srv.sql<[{ n: number }]>`select count(*)::int as n from demo_calls`)[0].n).toBe(before)
    // Another address is not held back.
    expect((await postCall(srv, { phone: nextNumber(0) }, nextIp())).status).toBe(202)
  })

  it("per number a day, whichever address asks: 429 with Retry-After", async () => {
    const phone = nextNumber(0)
    expect((await postCall(srv, { phone }, nextIp())).status).toBe(202)
    // The same number written another way is the same number.
    const national = `(${phone.slice(2, 5)}) ${phone.slice(5, 8)}-${phone.slice(8)}`
    const wait = await refused(await postCall(srv, { phone: national }, nextIp()), /a day to one number/)
    expect(wait).toBeGreaterThan(86_000)
  })

  it("the cool-down: a number the demo dialled in the last 7 days waits out the week (429)", async () => {
    const phone = nextNumber(1)
    const res = await postCall(srv, { phone }, nextIp())
    await waitDone(srv, ((await res.json()) as { feed_token: string }).feed_token)
    // A new day's number budget, but the same week.
    await srv.sql`delete from rate_counters where key = ${`demo:call:number:${phone}`}`
    const wait = await refused(await postCall(srv, { phone }, nextIp()), /last 7 days/)
    expect(wait).toBeGreaterThan(7 * 86_400 - 120)
    expect(wait).toBeLessThanOrEqual(7 * 86_400)
  })
})

describe("refused numbers", () => {
  const invalid = async (res: Response, field: string, says: RegExp) => {
    const body = (await res.json()) as { code: string; field: string; error: string }
    expect(res.status, JSON.stringify(body)).toBe(422)
    expect(body).toMatchObject({ code: "VALIDATION_FAILED", field })
    expect(body.error).toMatch(says)
  }

  it("422 for a number that is not one, a premium-rate line, another country, or a name not a name", async () => {
    const ip = nextIp()
    await invalid(await postCall(srv, { phone: "12345" }, ip), "phone", /valid phone number/)
    await invalid(await postCall(srv, { phone: "+1 900 555 0123" }, ip), "phone", /mobile or landline/)
    await invalid(await postCall(srv, { phone: "+49 30 901820" }, ip), "phone", /only to numbers in/)
    await invalid(await postCall(srv, {}, ip), "phone", /required/)
    await invalid(await postCall(srv, { phone: nextNumber(0), name: "call 555 0100" }, ip), "name", /a name/)
    await invalid(await postCall(srv, { phone: nextNumber(0), persona: "meera" }, ip), "persona", /one of/)
    // None of them counted against the address's budget.
    for (let i = 0; i < PER_IP; i++) expect((await postCall(srv, { phone: nextNumber(0) }, ip)).status).toBe(202)
  })

  it("422 for a number on the demo's do-not-call list or the national registry; nothing is queued", async () => {
    const tenant = await demoTenant()
    const listed = nextNumber(3)
    await srv.sql`insert into dnc_entries (tenant_id, phone_e164, source) values (${tenant}, ${listed}, 'call')`
    const registered = "+919812345673"
    await srv.sql`insert into ncpr_registry (phone_e164, preference) values (${registered}, '0')`
    const before = (await srv.sql<[{ n: number }]>`select count(*)::int as n from demo_calls`)[0].n
    await invalid(await postCall(srv, { phone: listed }, nextIp()), "phone", /asked not to get demo calls/)
    await invalid(await postCall(srv, { phone: "+91 98123 45673" }, nextIp()), "phone", /registry/)
    expect((await srv.sql<[{ n: number }]>`select count(*)::int as n from demo_calls`)[0].n).toBe(before)
  })
})

describe("the feed token", () => {
  it("unknown: 404 NOT_FOUND; a token is required (422)", async () => {
    const res = await feedOf(srv, "A".repeat(43))
    expect(res.status).toBe(404)
    expect(res.body).toMatchObject({ code: "NOT_FOUND" })
    expect((await fetch(`${srv.url}/demo/feed`)).status).toBe(422)
  })

  it("expires after an hour: 404 once the clock passes it, through the same feed", async () => {
    const res = await postCall(srv, { phone: nextNumber(0) }, nextIp())
    const { feed_token } = (await res.json()) as { feed_token: string }
    const read = (at: number) =>
      srv.running.runtime.runPromise(
        demoFeed(feed_token, 0).pipe(Effect.either, Effect.provide(Clock.fixed(new Date(at)).layer)),
      )
    const within = await read(Date.now() + 3599_000)
    expect(within._tag).toBe("Right")
    const after = await read(Date.now() + 3601_000)
    expect(after._tag === "Left" && after.left._tag).toBe("NotFound")
    // Over HTTP, once the row says it expired.
    await srv.sql`update demo_calls set expires_at = now() - interval '1 second'
      where feed_token_sha256 = sha256(convert_to(${feed_token}, 'UTF8'))`
    expect((await feedOf(srv, feed_token)).status).toBe(404)
  })
})
