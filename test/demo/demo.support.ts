// Helpers for the demo suites: POST /demo/call from a chosen client address (the server trusts
// 127.0.0.1 as its proxy), read the feed, and poll it until the call is over.
import { expect } from "vitest"
import type { TestServer } from "../support/harness.js"

export interface FeedEvent {
  seq: number
  at: string
  kind: "queued" | "ringing" | "answered" | "turn" | "ended"
  text?: string
  speaker?: string
  outcome?: string
}
export interface Feed {
  events: FeedEvent[]
  done: boolean
}

export const postCall = (srv: Pick<TestServer, "url">, body: unknown, ip: string) =>
  fetch(`${srv.url}/demo/call`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": ip },
    body: JSON.stringify(body),
  })

export async function feedOf(
  srv: Pick<TestServer, "url">,
  token: string,
  after?: number,
): Promise<{ status: number; body: Feed & { code?: string } }> {
  const q = new URLSearchParams({ token, ...(after !== undefined && { after: String(after) }) })
  const res = await fetch(`${srv.url}/demo/feed?${q}`)
  return { status: res.status, body: (await res.json()) as Feed & { code?: string } }
}

/** Polls the feed (as a page would) until it says done; each read's events must extend the last. */
export async function waitDone(srv: Pick<TestServer, "url">, token: string, timeoutMs = 20_000): Promise<Feed> {
  const deadline = Date.now() + timeoutMs
  let seen: FeedEvent[] = []
  for (;;) {
    const { status, body } = await feedOf(srv, token)
    expect(status).toBe(200)
    // Nothing once shown changes or disappears: a later read only adds events.
    expect(body.events.slice(0, seen.length)).toEqual(seen)
    seen = body.events
    if (body.done) return body
    if (Date.now() > deadline) throw new Error(`demo call not over: ${JSON.stringify(body)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
