// The process's one expiry timer (api/pipeline/deadlines.ts) and how OpenStreams uses it: items due
// at their instants in order, cancelled ones never, one timer however many wait; a stream ends at
// its credential's expiry only when it asked to, and stops waiting once it closes.
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest"
import type { OpenStream } from "../../api/http.js"
import { Deadlines } from "../../api/pipeline/deadlines.js"
import { expiryOf, OpenStreams } from "../../api/pipeline/open-streams.js"
import type { KeyPrincipal, UserPrincipal } from "../../src/auth/principal.js"
import { stopSharedServers } from "../support/harness.js"

// No shared server runs beside this suite: it fakes the process's timers, which would be theirs too.
beforeAll(stopSharedServers)

const T0 = Date.UTC(2030, 0, 1)

beforeEach(() => {
  vi.useFakeTimers()
  vi.setSystemTime(T0)
})
afterEach(() => vi.useRealTimers())

function recorder() {
  const fired: Array<{ item: number; at: number }> = []
  const d = new Deadlines<number>((items) => {
    for (const item of items) fired.push({ item, at: Date.now() })
  })
  return { d, fired }
}

describe("Deadlines", () => {
  it("hands each item over at its instant, earliest first, on one timer", () => {
    const { d, fired } = recorder()
    d.add(T0 + 300, 3)
    d.add(T0 + 100, 1)
    d.add(T0 + 200, 2)
    d.add(T0 + 100, 4)
    expect(vi.getTimerCount()).toBe(1)
    vi.advanceTimersByTime(99)
    expect(fired).toEqual([])
    vi.advanceTimersByTime(1)
    expect(fired.map((f) => f.item).sort()).toEqual([1, 4])
    vi.advanceTimersByTime(1_000)
    expect(fired).toEqual([
      expect.objectContaining({ at: T0 + 100 }),
      expect.objectContaining({ at: T0 + 100 }),
      { item: 2, at: T0 + 200 },
      { item: 3, at: T0 + 300 },
    ])
    expect(d.size).toBe(0)
    expect(vi.getTimerCount()).toBe(0)
  })

  it("never hands over a cancelled item; cancelling the earliest moves the timer to the next", () => {
    const { d, fired } = recorder()
    const first = d.add(T0 + 100, 1)
    d.add(T0 + 500, 2)
    const third = d.add(T0 + 200, 3)
    first.cancel()
    third.cancel()
    third.cancel()
    expect(d.size).toBe(1)
    expect(vi.getTimerCount()).toBe(1)
    vi.advanceTimersByTime(499)
    expect(fired).toEqual([])
    vi.advanceTimersByTime(1)
    expect(fired).toEqual([{ item: 2, at: T0 + 500 }])
    // After it fired, cancelling is nothing.
    first.cancel()
    expect(vi.getTimerCount()).toBe(0)
  })

  it("hands over an instant already past at once", () => {
    const { d, fired } = recorder()
    d.add(T0 - 5_000, 1)
    vi.advanceTimersByTime(0)
    expect(fired).toEqual([{ item: 1, at: T0 }])
  })

  it("waits for an instant beyond setTimeout's longest delay instead of firing at once", () => {
    const { d, fired } = recorder()
    const days = 40 * 86_400_000
    d.add(T0 + days, 1)
    vi.advanceTimersByTime(days - 1)
    expect(fired).toEqual([])
    vi.advanceTimersByTime(1)
    expect(fired).toEqual([{ item: 1, at: T0 + days }])
  })

  it("keeps 10,000 items in order with a third cancelled, on one timer", () => {
    const { d, fired } = recorder()
    const n = 10_000
    let seed = 7
    const random = () => (seed = (seed * 48_271) % 2_147_483_647) / 2_147_483_647
    const live = new Map<number, number>()
    const handles = []
    for (let i = 0; i < n; i++) {
      const at = T0 + 1 + Math.floor(random() * 60_000)
      live.set(i, at)
      handles.push(d.add(at, i))
    }
    for (let i = 0; i < n; i += 3) {
      handles[i]!.cancel()
      live.delete(i)
    }
    expect(d.size).toBe(live.size)
    expect(vi.getTimerCount()).toBe(1)
    vi.advanceTimersByTime(60_001)
    expect(fired.length).toBe(live.size)
    for (const f of fired) expect(f.at).toBe(live.get(f.item))
    for (let i = 1; i < fired.length; i++) expect(fired[i]!.at).toBeGreaterThanOrEqual(fired[i - 1]!.at)
  })
})

function fakeStream(): OpenStream & { ended: boolean } {
  const handlers: Array<() => void> = []
  const s = {
    ended: false,
    closed: false,
    write: async () => true,
    bufferedBytes: () => 0,
    onClose: (cb: () => void) => handlers.push(cb),
    end() {
      if (s.closed) return
      s.ended = true
      s.closed = true
      for (const h of handlers.splice(0)) h()
    },
    abort() {},
    finished: Promise.resolve(),
  }
  return s
}

const key = (expiresAt: Date | null): KeyPrincipal => ({
  kind: "api_key",
  keyId: 1,
  tenantId: 1,
  scope: "read",
  expiresAt,
})
const session = (exp: number): UserPrincipal => ({
  kind: "user",
  userId: 1,
  tenantId: 1,
  role: "owner",
  email: "a@b.c",
  jti: "j",
  expiresAt: exp,
  via: "bearer",
})

describe("OpenStreams and expiry", () => {
  it("reads a key's expires_at and a session's exp (seconds) as epoch milliseconds; no expiry is none", () => {
    expect(expiryOf(key(new Date(T0 + 5)))).toBe(T0 + 5)
    expect(expiryOf(key(null))).toBeUndefined()
    expect(expiryOf(session(T0 / 1000 + 60))).toBe(T0 + 60_000)
  })

  it("ends an event stream at its credential's expiry; not a download, not a key without expiry", () => {
    const streams = new OpenStreams()
    const events = fakeStream()
    const bySession = fakeStream()
    const download = fakeStream()
    const forever = fakeStream()
    streams.add(events, key(new Date(T0 + 2_000)), { endAtExpiry: true })
    streams.add(bySession, session(T0 / 1000 + 3), { endAtExpiry: true })
    streams.add(download, key(new Date(T0 + 2_000)))
    streams.add(forever, key(null), { endAtExpiry: true })
    expect(streams.expiring).toBe(2)
    vi.advanceTimersByTime(1_999)
    expect(events.ended).toBe(false)
    vi.advanceTimersByTime(1)
    expect(events.ended).toBe(true)
    expect(bySession.ended).toBe(false)
    vi.advanceTimersByTime(1_000)
    expect(bySession.ended).toBe(true)
    expect([download.ended, forever.ended]).toEqual([false, false])
    expect(streams.size).toBe(2)
  })

  it("stops waiting for a stream that closed first", () => {
    const streams = new OpenStreams()
    const s = fakeStream()
    streams.add(s, key(new Date(T0 + 2_000)), { endAtExpiry: true })
    s.end()
    expect(streams.expiring).toBe(0)
    expect(vi.getTimerCount()).toBe(0)
  })
})
