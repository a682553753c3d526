// Small HTTP helpers for suites that act as users: sign up (and verify the email through the
// mailed link, as a person would), sign in, call with a bearer.
import { randomBytes } from "node:crypto"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import type { TestServer } from "./harness.js"

export interface Session {
  readonly email: string
  readonly password: string
  readonly token: string
  readonly userId: number
  readonly tenantId: number
  readonly cookie: string
}

/** The system key of the suites' servers (SYSTEM_KEY: the internal endpoints' credential). */
export const SYSTEM_KEY = "system-key-for-tests-0123456789"

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
  // Holds scaled all the way (the product's 20 s floor is for people; test/runs/approval-hold-floor checks it).
  APPROVAL_HOLD_FLOOR_MS: "0",
}

/**
 * FAST_RUNTIME_ENV with holds that outlast any test (a proposal waits for the test's decision), the
 * internal endpoints' key and an operator to patch calls in to: the approval, progress and outreach
 * suites share one such server per worker.
 */
export const HELD_RUNTIME_ENV: Readonly<Record<string, string>> = {
  ...FAST_RUNTIME_ENV,
  APPROVAL_HOLD_MS: "1000000",
  SYSTEM_KEY,
  OPERATOR_NUMBER: "+12025550189",
}

export const uniqueEmail = (tag = "user") => `${tag}-${randomBytes(4).toString("hex")}@example.com`

export function api(srv: TestServer) {
  const call = (
    method: string,
    path: string,
    opts: { body?: unknown; token?: string; headers?: Record<string, string> } = {},
  ) =>
    fetch(srv.url + path, {
      method,
      headers: {
        ...(opts.body !== undefined && { "content-type": "application/json" }),
        ...(opts.token !== undefined && { authorization: `Bearer ${opts.token}` }),
        ...opts.headers,
      },
      ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
    })

  /**
   * Signs up and signs in. By default the email is then verified the real way: the link is read
   * from the server's outbox and opened (runs need a verified owner). `verify: false` leaves the
   * account unverified. A server known only by its URL (no config) has no outbox we can read, so
   * its accounts stay unverified.
   */
  async function signup(
    opts: { email?: string; password?: string; country?: string; full_name?: string; verify?: boolean } = {},
  ): Promise<Session> {
    const email = opts.email ?? uniqueEmail()
    const password = opts.password ?? "correct horse battery staple"
    const res = await call("POST", "/auth/signup", {
      body: {
        email,
        password,
        ...(opts.country && { country: opts.country }),
        ...(opts.full_name && { full_name: opts.full_name }),
      },
    })
    if (res.status !== 201) throw new Error(`signup ${res.status}: ${await res.text()}`)
    if (opts.verify !== false && srv.config !== undefined) await verifyEmail(email)
    return login(email, password)
  }

  /** Opens the newest verification link mailed to `email` (against this server, whatever its base). */
  async function verifyEmail(email: string): Promise<void> {
    const link = readOutbox(srv.config.outboxFile)
      .filter((m) => m.kind === "verify_email" && m.to === email.toLowerCase())
      .at(-1)?.links[0]
    if (link === undefined) throw new Error(`no verification mail to ${email} in ${srv.config.outboxFile}`)
    const token = new URL(link, srv.url).searchParams.get("token")
    const res = await call("GET", `/auth/verify-email?token=${encodeURIComponent(token ?? "")}`)
    if (res.status !== 200) throw new Error(`verify email ${res.status}: ${await res.text()}`)
  }

  async function login(email: string, password: string): Promise<Session> {
    const res = await call("POST", "/auth/login", { body: { email, password } })
    if (res.status !== 200) throw new Error(`login ${res.status}: ${await res.text()}`)
    const body = (await res.json()) as { token: string; user: { id: number }; tenant: { id: number } }
    const cookie = res.headers.get("set-cookie")!.split(";")[0]!
    return { email, password, token: body.token, userId: body.user.id, tenantId: body.tenant.id, cookie }
  }

  async function createKey(
    session: Session,
    body: Record<string, unknown> = { name: "test key" },
  ): Promise<{ id: number; secret: string; [k: string]: unknown }> {
    const res = await call("POST", "/api-keys", { token: session.token, body })
    if (res.status !== 201) throw new Error(`create key ${res.status}: ${await res.text()}`)
    return (await res.json()) as { id: number; secret: string }
  }

  /** A workflow of the session's workspace with a run marked running in the database (nothing dials): its id. */
  async function runningRun(session: Session): Promise<number> {
    const res = await call("POST", "/api/workflows", {
      token: session.token,
      body: { nl_prompt: "Check in with our customers." },
    })
    if (res.status !== 201) throw new Error(`create workflow ${res.status}: ${await res.text()}`)
    const w = (await res.json()) as { id: number }
    const [run] = await srv.sql<[{ id: number }]>`
      insert into runs (tenant_id, workflow_id, status) values (${session.tenantId}, ${w.id}, 'running') returning id`
    return run.id
  }

  /** The token of the newest invitation link mailed to `email`. */
  function invitationToken(email: string): string {
    const link = readOutbox(srv.config.outboxFile)
      .filter((m) => m.kind === "invitation" && m.to === email.toLowerCase())
      .at(-1)?.links[0]
    if (link === undefined) throw new Error(`no invitation mail to ${email} in ${srv.config.outboxFile}`)
    const token = new URLSearchParams(new URL(link, srv.url).hash.split("?")[1] ?? "").get("token")
    if (token === null) throw new Error(`no token in invitation link ${link}`)
    return token
  }

  /**
   * A second member of `by`'s workspace, the real way: `by` invites an address with `role`, the
   * invitation's link is read from the outbox and accepted with a password, which signs them in.
   */
  async function addMember(
    by: Session,
    role: "admin" | "supervisor" | "analyst",
    opts: { email?: string; password?: string } = {},
  ): Promise<Session> {
    const email = opts.email ?? uniqueEmail(role)
    const password = opts.password ?? "another horse battery staple"
    const invited = await call("POST", "/members/invite", { token: by.token, body: { email, role } })
    if (invited.status !== 201) throw new Error(`invite ${invited.status}: ${await invited.text()}`)
    const res = await call("POST", "/auth/invitations/accept", {
      body: { token: invitationToken(email), password },
    })
    if (res.status !== 201) throw new Error(`accept invitation ${res.status}: ${await res.text()}`)
    const body = (await res.json()) as { token: string; user: { id: number }; tenant: { id: number } }
    const cookie = res.headers.get("set-cookie")!.split(";")[0]!
    return { email, password, token: body.token, userId: body.user.id, tenantId: body.tenant.id, cookie }
  }

  return { call, signup, verifyEmail, login, createKey, runningRun, invitationToken, addMember }
}
