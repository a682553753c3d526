// Patch-in over telco_a against the fake telco: the callee's call gets the recorded-conference
// TwiML (as the answer to the voice webhook waiting, or through a REST update of the live call),
// the operator is called into the same conference over REST, and the agent's leg drops.
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  conferenceName,
  type LegWebhooks,
  makeTelcoATelephony,
  type WebhookChannel,
} from "../../src/providers/telephony/telco-a.telephony.js"
import type { CarrierEvent, TelephonyProvider } from "../../src/providers/telephony/telephony.interface.js"
import { type FakeTelco, type FakeTelcoAccount, startFakeTelco } from "../support/fake-telco.js"
import { type FakeCall, fakeOutboundCalls } from "../support/fake-telco-calls.js"

let fake: FakeTelco
let calls: Map<string, FakeCall>
let account: FakeTelcoAccount
let hooks: Server
let telephony: TelephonyProvider
const legs = new Map<number, LegWebhooks>()
/** Voice webhooks received, by call id. */
const voiceHits = new Map<number, number>()

// Our webhooks, as the api process would receive them (no signature check: the channel is what is under test).
const channel: WebhookChannel = {
  register(callId, handlers) {
    legs.set(callId, handlers)
    return () => legs.delete(callId)
  },
}

beforeAll(async () => {
  fake = await startFakeTelco()
  calls = fakeOutboundCalls(fake, { stepMs: 150 })
  account = fake.addAccount()
  hooks = createServer((req, res) => {
    let body = ""
    req.on("data", (c: Buffer) => (body += c.toString()))
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://x")
      const callId = Number(url.searchParams.get("call_id"))
      const params = Object.fromEntries(new URLSearchParams(body))
      const turn = url.searchParams.get("turn")
      const leg = legs.get(callId)
      if (url.pathname.startsWith("/voice/")) {
        voiceHits.set(callId, (voiceHits.get(callId) ?? 0) + 1)
        const hangup = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'
        void (leg?.voice({ ...params, ...(turn !== null && { turn }) }) ?? Promise.resolve(hangup)).then((doc) =>
          res.writeHead(200, { "content-type": "text/xml" }).end(doc),
        )
      } else {
        leg?.status(params)
        res.writeHead(204).end()
      }
    })
  })
  await new Promise<void>((r) => hooks.listen(0, "127.0.0.1", r))
  const port = (hooks.address() as AddressInfo).port
  telephony = makeTelcoATelephony({
    account: { sid: account.sid, token: account.token, apiUrl: fake.url, callerId: "+14155550000" },
    publicBaseUrl: `http://127.0.0.1:${port}`,
    channel,
  })
})
afterAll(async () => {
  await new Promise<void>((r) => hooks?.close(() => r()))
  await fake?.close()
})

const until = async (check: () => boolean, what: string) => {
  for (let i = 0; i < 200; i++) {
    if (check()) return
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** Dials `to` and waits until a person answered and the first voice webhook is waiting on the leg. */
async function answered(callId: number, to: string) {
  const events: CarrierEvent[] = []
  const leg = telephony.dial({ callId, to, from: null, tenantId: 1 }, (e) => events.push(e))
  await until(() => events.some((e) => e.type === "ANSWERED") && (voiceHits.get(callId) ?? 0) > 0, "the answer")
  await until(() => leg.providerCallId !== "", "the call sid")
  const fakeCall = () => calls.get(leg.providerCallId)!
  return { leg, events, fakeCall }
}

const operatorCall = (to: string) => [...calls.values()].find((c) => c.to === to && c.twiml !== undefined)

describe("telco_a handoff", () => {
  it("answers the waiting voice webhook with the recorded conference and calls the operator into it", async () => {
    const { leg, events, fakeCall } = await answered(9101, "+12025550105")
    expect(await leg.handoff!("+12025550188")).toEqual({ conference_id: conferenceName(9101) })
    await until(() => fakeCall().conference !== undefined, "the callee in the conference")
    expect(fakeCall()).toMatchObject({ conference: "parley-call-9101", recorded: true, status: "in-progress" })
    const op = operatorCall("+12025550188")
    expect(op).toMatchObject({ conference: "parley-call-9101", recorded: true, from: "+14155550000" })
    // The agent's leg dropped without hanging the callee up: no REST hang-up, no more agent turns.
    expect(fake.requests.some((r) => r.form.Status === "completed")).toBe(false)
    expect(events.at(-1)).toMatchObject({ type: "HANGUP", by: "agent" })
    await expect(leg.say("still there?")).rejects.toThrow()
  })

  it("moves the live call by a REST update when no voice webhook is waiting", async () => {
    const { leg, fakeCall } = await answered(9102, "+12025550104")
    await leg.say("Hello, this is Ava.")
    // listen() answers the waiting webhook with a Gather; the fake callee takes 150 ms to speak.
    const heard = leg.listen()
    await until(() => fakeCall().heard.length > 0, "the agent's line")
    expect(await leg.handoff!("+12025550187")).toEqual({ conference_id: "parley-call-9102" })
    expect(await heard).toBeNull()
    const update = fake.requests.find((r) => r.path.endsWith(`/Calls/${leg.providerCallId}.json`))
    expect(update?.form.Twiml).toContain('<Conference record="record-from-start"')
    expect(fakeCall()).toMatchObject({ conference: "parley-call-9102", recorded: true })
    expect(operatorCall("+12025550187")?.conference).toBe("parley-call-9102")
  })

  it("refuses a call that is not connected, and one already handed off", async () => {
    const events: CarrierEvent[] = []
    const ringing = telephony.dial({ callId: 9103, to: "+12025550103", from: null, tenantId: 1 }, (e) => events.push(e))
    await expect(ringing.handoff!("+12025550188")).rejects.toThrow(/not connected/)
    const { leg } = await answered(9104, "+12025550103")
    await leg.handoff!("+12025550188")
    await expect(leg.handoff!("+12025550188")).rejects.toThrow(/not connected/)
    await until(() => events.length > 0 && events.some((e) => e.type === "ANSWERED"), "the first call")
    await ringing.hangup()
  })
})
