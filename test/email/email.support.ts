// Helpers of the email suites: the outreach call with the system key, the outbox, the pages.
import { createHmac } from "node:crypto"
import { readOutbox } from "../../src/providers/mail/outbox.mail.js"
import { SYSTEM_KEY } from "../support/clients.js"
import type { TestServer } from "../support/harness.js"

export const MAIL_A_SECRET = "mail-a-secret-for-tests"
export const MAIL_B_SECRET = "mail-b-secret-for-tests"

export type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

export function emailClient(srv: TestServer) {
  const outreach = async (tenantId: number, body: Record<string, unknown>) => {
    const res = await fetch(`${srv.url}/api/internal/outreach/email`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-system-key": SYSTEM_KEY, "x-tenant-id": String(tenantId) },
      body: JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as Json }
  }
  /** The last outbox message to `to`. */
  const lastMail = (to: string) =>
    readOutbox(srv.config.outboxFile)
      .filter((m) => m.to === to)
      .at(-1)
  const tokenOf = (url: string) => new URL(url).searchParams.get("t")!
  const page = async (method: "GET" | "POST", path: string, form?: Record<string, string>) => {
    const res = await fetch(`${srv.url}${path}`, {
      method,
      ...(form !== undefined && {
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(form).toString(),
      }),
    })
    return { status: res.status, headers: res.headers, text: await res.text() }
  }
  const mailB = (body: unknown, secret = MAIL_B_SECRET, header = "x-mail_b-signature") => {
    const raw = JSON.stringify(body)
    const sig = createHmac("sha256", secret).update(raw).digest("hex")
    return fetch(`${srv.url}/email/webhooks/mail_b`, {
      method: "POST",
      headers: { "content-type": "application/json", [header]: sig },
      body: raw,
    })
  }
  /** key null: no key at all. */
  const mailA = (body: unknown, key: string | null = MAIL_A_SECRET) =>
    fetch(`${srv.url}/email/webhooks/mail_a${key === null ? "" : `?key=${encodeURIComponent(key)}`}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    })
  const message = async (id: number) => (await srv.sql<Json[]>`select * from email_messages where id = ${id}`)[0]
  const events = async (tenantId: number, to: string) =>
    (
      await srv.sql<{ kind: string }[]>`
        select kind from email_events where tenant_id = ${tenantId} and to_email = ${to} order by id`
    ).map((r) => r.kind)
  return { outreach, lastMail, tokenOf, page, mailA, mailB, message, events }
}
