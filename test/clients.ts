// Small HTTP helpers for suites that act as users: sign up, sign in, call with a bearer.
import { randomBytes } from "node:crypto"
import type { TestServer } from "./harness.js"

export interface Session {
  readonly email: string
  readonly password: string
  readonly token: string
  readonly userId: number
  readonly tenantId: number
  readonly cookie: string
}

/**
 * A server whose runtime dials at test speed: simulated calls 100× faster, no calling window, high
 * pacing limits, runs claimed within 200 ms. Suites override single settings where they test them.
 */
export const FAST_RUNTIME_ENV: Readonly<Record<string, string>> = {
  SIM_TIME_SCALE: "0.01",
  CALLING_HOURS: "any",
  DIALER_CPS_PER_CARRIER: "200",
  DIALER_CPS_PER_TENANT: "200",
  RUN_CLAIM_INTERVAL_MS: "200",
  DIALER_RETRY_BACKOFF_MS: "20000",
  APPROVAL_HOLD_MS: "20000",
}

export const uniqueEmail = (tag = "user") => `${tag}-${randomBytes(4).toString("hex")}@example.com`

export function api(srv: TestServer) {
  const call = (method: string, path: string, opts: { body?: unknown; token?: string; headers?: Record<string, string> } = {}) =>
    fetch(srv.url + path, {
      method,
      headers: {
        ...(opts.body !== undefined && { "content-type": "application/json" }),
        ...(opts.token !== undefined && { authorization: `Bearer ${opts.token}` }),
        ...opts.headers,
      },
      ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
    })

  async function signup(opts: { email?: string; password?: string; country?: string; full_name?: string } = {}): Promise<Session> {
    const email = opts.email ?? uniqueEmail()
    const password = opts.password ?? "correct horse battery staple"
    const res = await call("POST", "/auth/signup", { body: { email, password, ...(opts.country && { country: opts.country }), ...(opts.full_name && { full_name: opts.full_name }) } })
    if (res.status !== 201) throw new Error(`signup ${res.status}: ${await res.text()}`)
    return login(email, password)
  }

  async function login(email: string, password: string): Promise<Session> {
    const res = await call("POST", "/auth/login", { body: { email, password } })
    if (res.status !== 200) throw new Error(`login ${res.status}: ${await res.text()}`)
    const body = (await res.json()) as { token: string; user: { id: number }; tenant: { id: number } }
    const cookie = res.headers.get("set-cookie")!.split(";")[0]!
    return { email, password, token: body.token, userId: body.user.id, tenantId: body.tenant.id, cookie }
  }

  async function createKey(session: Session, body: Record<string, unknown> = { name: "test key" }): Promise<{ id: number; secret: string; [k: string]: unknown }> {
    const res = await call("POST", "/api-keys", { token: session.token, body })
    if (res.status !== 201) throw new Error(`create key ${res.status}: ${await res.text()}`)
    return (await res.json()) as { id: number; secret: string }
  }

  return { call, signup, login, createKey }
}
