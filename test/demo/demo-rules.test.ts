// The demo on a server with ALTCHA_REQUIRED and calling windows in force (no CALLING_HOURS=any): a
// call needs a solved challenge (400 as signup answers, after the number's own 422), and a number
// whose calling window is shut is not held for later: the feed ends at once, nobody is dialled.
import { type Challenge, solveChallenge } from "altcha-lib"
import { deriveKey } from "altcha-lib/algorithms/sha"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { callingWindowCheck } from "../../src/dialing/calling-window.js"
import { FAST_RUNTIME_ENV } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { postCall, waitDone } from "./demo.support.js"

let srv: TestServer
beforeAll(async () => {
  const { CALLING_HOURS: _, ...fast } = FAST_RUNTIME_ENV
  srv = await startTestServer({ env: { ...fast, ALTCHA_REQUIRED: "true", TRUSTED_PROXIES: "127.0.0.1" } })
})
afterAll(async () => srv?.stop())

/** A fresh challenge from the server, solved as the widget does, as the base64 payload. */
async function solved(): Promise<string> {
  const challenge = (await (await fetch(`${srv.url}/auth/altcha/challenge`)).json()) as Record<string, unknown>
  const solution = await solveChallenge({ challenge: challenge as unknown as Challenge, deriveKey })
  if (solution === null) throw new Error("challenge not solved")
  return Buffer.from(JSON.stringify({ challenge, solution })).toString("base64")
}

const errorOf = async (res: Response) => ({ status: res.status, ...((await res.json()) as Record<string, unknown>) })
const demoCalls = async () => (await srv.sql<[{ n: number }]>`select count(*)::int as n from demo_calls`)[0].n

/** Numbers ending in 0 (the sim's no-answer) in three far-apart zones: at any hour one is outside 09:00–21:00. */
const CANDIDATES = ["+12025550140", "+919876543210", "+61412345670"]

describe("ALTCHA_REQUIRED", () => {
  it("400 CHALLENGE_REQUIRED without a solution, CHALLENGE_FAILED for a wrong one; nothing queued", async () => {
    const before = await demoCalls()
    expect(await errorOf(await postCall(srv, { phone: "+12025550150" }, "198.51.100.1"))).toMatchObject({
      status: 400,
      code: "CHALLENGE_REQUIRED",
      field: "altcha",
    })
    const wrong = await postCall(srv, { phone: "+12025550150", altcha: "bm90IGEgc29sdXRpb24=" }, "198.51.100.1")
    expect(await errorOf(wrong)).toMatchObject({ status: 400, code: "CHALLENGE_FAILED", field: "altcha" })
    // A bad number is answered first, so a typo does not cost the visitor their solved challenge.
    expect(await errorOf(await postCall(srv, { phone: "123" }, "198.51.100.1"))).toMatchObject({
      status: 422,
      field: "phone",
    })
    expect(await demoCalls()).toBe(before)
  })

  it("202 with a solved challenge, which cannot be used twice", { timeout: 60_000 }, async () => {
    const altcha = await solved()
    const first = await postCall(srv, { phone: "+12025550160", altcha }, "198.51.100.2")
    expect(first.status, await first.clone().text()).toBe(202)
    const again = await postCall(srv, { phone: "+12025550170", altcha }, "198.51.100.2")
    expect(await errorOf(again)).toMatchObject({ status: 400, code: "CHALLENGE_FAILED" })
  })
})

describe("the calling window", () => {
  it("a number outside its calling hours is not held for later: the feed ends, nobody is dialled", {
    timeout: 60_000,
  }, async () => {
    const closed = CANDIDATES.find(
      (phoneE164) =>
        !callingWindowCheck({ phoneE164, schedule: {}, scheduleKind: "immediate", now: Date.now(), any: false }).ok,
    )
    expect(closed, "one of the zones is always outside 09:00–21:00").toBeDefined()
    const res = await postCall(srv, { phone: closed, altcha: await solved() }, "198.51.100.3")
    expect(res.status, await res.clone().text()).toBe(202)
    const feed = await waitDone(srv, ((await res.json()) as { feed_token: string }).feed_token)
    expect(feed.events.map((e) => e.kind)).toEqual(["queued", "ended"])
    expect(feed.events[1]!.outcome).toMatch(/^(outside_calling_hours|not_a_calling_day)$/)
    expect(feed.events[1]!.text).toMatch(/^Not called/)
    const [row] = await srv.sql<[{ status: string; attempts: number; calls: number }]>`
      select t.status, t.attempts, (select count(*)::int from calls c where c.run_id = t.run_id) as calls
      from demo_calls d join run_targets t on t.run_id = d.run_id where d.id = (select max(id) from demo_calls)`
    expect(row).toEqual({ status: "skipped", attempts: 0, calls: 0 })
  })
})
