// The public preview endpoint's bounds: per-address budgets for anonymous callers (signed-in
// workspaces have their own), and the sweep that evicts unused clips and holds the store's caps.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addressBucket } from "../../src/voices/previews.service.js"
import { sweepPreviewClips } from "../../src/voices/previews.sweeper.js"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const ANON_BUDGET = 3
const TTL_DAYS = 30

let srv: TestServer
let client: ReturnType<typeof api>
let session: Session

beforeAll(async () => {
  srv = await startTestServer({
    env: { PREVIEWS_ANON_PER_IP_HOUR: String(ANON_BUDGET), PREVIEW_CLIP_TTL_DAYS: String(TTL_DAYS) },
  })
  client = api(srv)
  session = await client.signup()
})
afterAll(async () => {
  await srv?.stop()
})

const fresh = (line: string): string => `${line} Reference ${randomBytes(3).readUIntBE(0, 3)}.`

const preview = (body: unknown, headers: Record<string, string> = {}) =>
  client.call("POST", "/api/workflows/preview-opening", { body, headers })

async function previewOk(
  text: string,
  headers: Record<string, string> = {},
): Promise<{ clip_id: string; mp3_url: string }> {
  const res = await preview({ text, persona: "amelia" }, headers)
  expect(res.status, await res.clone().text()).toBe(200)
  return (await res.json()) as { clip_id: string; mp3_url: string }
}

const clipRows = async (id: string) =>
  (await srv.sql<{ id: string }[]>`select id from speech_clips where id = ${id}`).length

describe("rate limits on POST /api/workflows/preview-opening", () => {
  it(
    "answers an anonymous flood from one address with 429 past the budget, " +
      "while signed-in callers still get clips",
    async () => {
      await srv.sql`delete from rate_counters`
      const line = fresh("Hi, this is Amelia from Harbourside Energy.")
      for (let i = 0; i < ANON_BUDGET; i++) await previewOk(line)

      for (let i = 0; i < 5; i++) {
        const res = await preview({ text: line, persona: "amelia" })
        expect(res.status).toBe(429)
        const retryAfter = Number(res.headers.get("retry-after"))
        expect(retryAfter).toBeGreaterThanOrEqual(1)
        expect(retryAfter).toBeLessThanOrEqual(3600)
        expect(await res.json()).toMatchObject({ code: "RATE_LIMITED", retry_after_seconds: retryAfter })
      }
      // A refused request synthesises and stores nothing.
      const refusedText = fresh("This one should never be made.")
      expect((await preview({ text: refusedText, persona: "amelia" })).status).toBe(429)
      const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from speech_clips
        where persona = 'amelia' and created_at > now() - interval '1 minute'`
      expect(n).toBe(1)

      // The same address, signed in (bearer session, API key, cookie from our own origin), is not
      // counted against the address's budget.
      await previewOk(fresh("Signed in by bearer."), { authorization: `Bearer ${session.token}` })
      const key = await client.createKey(session, { name: "preview key", scope: "read" })
      await previewOk(fresh("Signed in by key."), { authorization: `Bearer ${key.secret}` })
      await previewOk(line, { cookie: session.cookie, origin: srv.url })

      // A credential that does not check out is an anonymous caller: it cannot escape the budget.
      expect(
        (await preview({ text: line, persona: "amelia" }, { authorization: "Bearer svc_live_notarealkey" })).status,
      ).toBe(429)
      expect((await preview({ text: line, persona: "amelia" }, { authorization: "Bearer not.a.jwt" })).status).toBe(429)
      // Nor can a cross-site page borrow a visitor's session cookie for its priority and budget.
      expect(
        (await preview({ text: line, persona: "amelia" }, { cookie: session.cookie, origin: "https://evil.example" }))
          .status,
      ).toBe(429)
    },
  )

  it("gives each address its own budget", async () => {
    await srv.sql`delete from rate_counters`
    await srv.sql`
      insert into rate_counters (key, hits, window_started_at)
      values (${`preview:ip:${addressBucket("127.0.0.1")}`}, ${ANON_BUDGET}, now())`
    expect((await preview({ text: "Hello there.", persona: "leo" })).status).toBe(429)
    await srv.sql`delete from rate_counters where key = ${`preview:ip:${addressBucket("127.0.0.1")}`}`
    expect((await preview({ text: "Hello there.", persona: "leo" })).status).toBe(200)
  })

  it("holds a signed-in workspace to its own hourly budget", async () => {
    const other = await client.signup()
    await srv.sql`insert into rate_counters (key, hits, window_started_at)
      values (${`preview:tenant:${other.tenantId}`}, 600, now())`
    const res = await preview({ text: "Hello again.", persona: "leo" }, { authorization: `Bearer ${other.token}` })
    expect(res.status).toBe(429)
    expect(await res.json()).toMatchObject({ code: "RATE_LIMITED" })
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
    // Other workspaces are unaffected.
    await previewOk("Hello again.", { authorization: `Bearer ${session.token}` })
  })

  it("refuses text over 500 characters with 422 before counting or synthesising anything", async () => {
    await srv.sql`delete from rate_counters`
    for (let i = 0; i < ANON_BUDGET + 2; i++) {
      const res = await preview({ text: "a".repeat(501), persona: "amelia" })
      expect(res.status).toBe(422)
      expect(await res.json()).toMatchObject({ code: "VALIDATION_FAILED", field: "text" })
    }
    // Refused input spent none of the budget.
    await previewOk(fresh("Still within budget."))
  })

  it("keys IPv6 clients by their /64", () => {
    expect(addressBucket("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64")
    expect(addressBucket("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64")
    expect(addressBucket("2001:db8::5")).toBe("2001:db8:0:0::/64")
    expect(addressBucket("::1")).toBe("0:0:0:0::/64")
    expect(addressBucket("198.51.100.7")).toBe("198.51.100.7")
  })
})

describe("preview clip sweep", () => {
  const run = (now: Date, limits?: Parameters<typeof sweepPreviewClips>[1]) =>
    srv.running.runtime.runPromise(sweepPreviewClips(now, limits))
  const signedIn = () => ({ authorization: `Bearer ${session.token}` })

  it("removes clips unused for longer than the TTL in one sweep; their URLs then 404, recent ones stay", async () => {
    const old = await previewOk(fresh("An old line nobody plays."), signedIn())
    const recent = await previewOk(fresh("A line played last week."), signedIn())
    await srv.sql`update speech_clips set last_used_at = now() - make_interval(days => ${TTL_DAYS + 1})
      where id = ${old.clip_id}`
    await srv.sql`update speech_clips set last_used_at = now() - make_interval(days => ${TTL_DAYS - 1})
      where id = ${recent.clip_id}`

    const result = await run(new Date())
    expect(result.expired).toBeGreaterThanOrEqual(1)
    expect(await clipRows(old.clip_id)).toBe(0)
    expect((await fetch(old.mp3_url)).status).toBe(404)
    expect(await clipRows(recent.clip_id)).toBe(1)
    expect((await fetch(recent.mp3_url)).status).toBe(200)

    // The sweep measures from the `now` it is given: a day past the recent clip's TTL, it goes too.
    await srv.sql`update speech_clips set last_used_at = now() - make_interval(days => ${TTL_DAYS - 1})
      where id = ${recent.clip_id}`
    await run(new Date(Date.now() + 2 * 86_400_000))
    expect(await clipRows(recent.clip_id)).toBe(0)
  })

  it("counts a repeated request as use: a stale clip asked for again survives the sweep", async () => {
    const text = fresh("Asked for again.")
    const clip = await previewOk(text, signedIn())
    await srv.sql`update speech_clips set last_used_at = now() - make_interval(days => ${TTL_DAYS + 1})
      where id = ${clip.clip_id}`
    expect((await previewOk(text, signedIn())).clip_id).toBe(clip.clip_id)
    await run(new Date())
    expect(await clipRows(clip.clip_id)).toBe(1)
  })

  it("evicts anonymous clips past their cap, least recently used first, and leaves signed-in clips alone", async () => {
    await srv.sql`delete from rate_counters`
    const anonOld = await previewOk(fresh("Anonymous, older."))
    const newerText = fresh("Anonymous, newer.")
    const anonNew = await previewOk(newerText)
    const mine = await previewOk(fresh("Signed in, oldest of all."), signedIn())
    // Anonymous clips of earlier tests are older still.
    await srv.sql`update speech_clips set last_used_at = now() - interval '5 days' where anonymous`
    await srv.sql`update speech_clips set last_used_at = now() - interval '3 days' where id = ${mine.clip_id}`
    await srv.sql`update speech_clips set last_used_at = now() - interval '2 days' where id = ${anonOld.clip_id}`
    await srv.sql`update speech_clips set last_used_at = now() - interval '1 day' where id = ${anonNew.clip_id}`
    const [{ anonymous }] = await srv.sql<
      [{ anonymous: number }]
    >`select count(*)::int as anonymous from speech_clips where anonymous`

    const result = await run(new Date(), { maxAnonymous: 1, batch: 1 })
    expect(result.evicted).toBe(anonymous - 1)
    expect(await clipRows(anonOld.clip_id)).toBe(0)
    expect(await clipRows(anonNew.clip_id)).toBe(1)
    expect(await clipRows(mine.clip_id)).toBe(1)

    // A signed-in request for an anonymous clip takes it out of the anonymous class.
    expect((await previewOk(newerText, signedIn())).clip_id).toBe(anonNew.clip_id)
    const [row] = await srv.sql<
      { anonymous: boolean }[]
    >`select anonymous from speech_clips where id = ${anonNew.clip_id}`
    expect(row!.anonymous).toBe(false)
  })

  it("holds the whole store to its cap, least recently used first", async () => {
    const a = await previewOk(fresh("Total cap, older."), signedIn())
    const b = await previewOk(fresh("Total cap, newer."), signedIn())
    await srv.sql`update speech_clips set last_used_at = now() - interval '10 days' where id = ${a.clip_id}`
    const [{ total }] = await srv.sql<[{ total: number }]>`select count(*)::int as total from speech_clips`
    const result = await run(new Date(), { maxClips: total - 1 })
    expect(result.evicted).toBe(1)
    expect(await clipRows(a.clip_id)).toBe(0)
    expect(await clipRows(b.clip_id)).toBe(1)
  })
})
