// Outreach email: send through the mail provider with a per-address per-channel unsubscribe link
// and the RFC 8058 headers, refusing suppressed or unsubscribed addresses; and the preference
// actions behind the token pages (unsubscribe, resubscribe, the channel list).
//
// Channel "transactional" is never blocked (verification and sign-in codes go through the auth
// services directly and never look at preferences either) and carries no unsubscribe link.
import { Effect } from "effect"
import { isErasedIdentifier } from "../erasure/suppression.js"
import { Db } from "../platform/Db.js"
import { Conflict, GatewayUnavailable, NotFound } from "../platform/errors.js"
import { Mail } from "../providers/Mail.js"
import * as repo from "./email.repo.js"
import { signToken, type TokenClaims } from "./email.token.js"

export const TRANSACTIONAL = "transactional"

export interface OutreachEmail {
  readonly to: string
  readonly subject: string
  readonly text?: string | undefined
  readonly html?: string | undefined
  readonly channel: string
  readonly template?: string | undefined
  readonly data?: Readonly<Record<string, unknown>> | undefined
}

export const normaliseEmail = (e: string): string => e.trim().toLowerCase()

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }
const escHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c]!)

/** {{name}} → data.name (escaped for HTML when `html`); unknown names render empty. */
export function fill(text: string, data: Readonly<Record<string, unknown>> | undefined, html: boolean): string {
  if (data === undefined) return text
  return text.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (_, name: string) => {
    const v = data[name]
    const s = v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v)
    return html ? escHtml(s) : s
  })
}

export const unsubscribeUrl = (base: string, token: string) => `${base}/email/unsubscribe?t=${token}`
export const preferencesUrl = (base: string, token: string) => `${base}/email/preferences?t=${token}`

export const sendOutreach = (tenantId: number, mail: OutreachEmail, base: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const provider = yield* Mail
    const workspace = yield* Effect.promise(() => repo.tenantName(sql, tenantId))
    if (workspace === undefined) return yield* Effect.fail(new NotFound({ message: `no workspace ${tenantId}` }))
    const to = normaliseEmail(mail.to)
    const transactional = mail.channel === TRANSACTIONAL
    if (!transactional) {
      // An erased data subject (POST /dsr/erase): refused without recording the address anywhere.
      if (yield* Effect.promise(() => isErasedIdentifier(sql, tenantId, "email", to)))
        return yield* Effect.fail(
          new Conflict({
            code: "RECIPIENT_SUPPRESSED",
            message: `the recipient does not receive ${mail.channel} email (erased)`,
            details: { reason: "erased", scope: "workspace" },
          }),
        )
      const block = yield* Effect.promise(() => repo.blockOf(sql, tenantId, to, mail.channel))
      if (block !== undefined) {
        yield* Effect.promise(() =>
          repo.addEvent(sql, {
            tenantId,
            to,
            messageId: null,
            kind: "blocked",
            channel: mail.channel,
            detail: block.reason,
          }),
        )
        return yield* Effect.fail(
          new Conflict({
            code: "RECIPIENT_SUPPRESSED",
            message: `${to} does not receive ${mail.channel} email (${block.reason})`,
            details: { reason: block.reason, scope: block.scope },
          }),
        )
      }
    }
    const subject = fill(mail.subject, mail.data, false)
    let text = mail.text === undefined ? "" : fill(mail.text, mail.data, false)
    let html =
      mail.html !== undefined
        ? fill(mail.html, mail.data, true)
        : `<p>${escHtml(text)
            .replace(/\n{2,}/g, "</p><p>")
            .replace(/\n/g, "<br>")}</p>`
    const links: string[] = []
    let headers: Record<string, string> | undefined
    if (!transactional) {
      const token = yield* Effect.promise(() => signToken(sql, { tenantId, email: to, channel: mail.channel }))
      const unsub = unsubscribeUrl(base, token)
      const prefs = preferencesUrl(base, token)
      links.push(unsub, prefs)
      text += `\n\n--\nUnsubscribe: ${unsub}\nEmail preferences: ${prefs}\n`
      html +=
        `<hr><p style="font-size:12px;color:#6e6e73"><a href="${escHtml(unsub)}">Unsubscribe</a> · ` +
        `<a href="${escHtml(prefs)}">Email preferences</a></p>`
      headers = { "List-Unsubscribe": `<${unsub}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" }
    }
    const id = yield* Effect.promise(() =>
      repo.insertMessage(sql, {
        tenantId,
        to,
        channel: mail.channel,
        category: transactional ? "transactional" : "outreach",
        template: mail.template ?? null,
        subject,
      }),
    )
    const sent = yield* Effect.either(
      Effect.tryPromise(() =>
        provider.send({
          to,
          subject,
          text,
          html,
          links,
          kind: transactional ? "transactional" : `outreach:${mail.channel}`,
          senderName: workspace,
          ...(headers && { headers }),
        }),
      ),
    )
    if (sent._tag === "Left") {
      const msg = sent.left.error instanceof Error ? sent.left.error.message : String(sent.left.error)
      yield* Effect.promise(async () => {
        await repo.markFailed(sql, id, msg.slice(0, 500))
        await repo.addEvent(sql, { tenantId, to, messageId: id, kind: "failed", channel: mail.channel })
      })
      return yield* Effect.fail(new GatewayUnavailable({ message: "the mail provider did not accept the message" }))
    }
    yield* Effect.promise(async () => {
      await repo.markSent(sql, id, provider.name, sent.right.id)
      await repo.addEvent(sql, { tenantId, to, messageId: id, kind: "sent", channel: mail.channel })
    })
    return {
      message_id: id,
      state: "sent" as const,
      provider: provider.name,
      provider_message_id: sent.right.id,
      to,
      channel: mail.channel,
      ...(links[0] !== undefined && { unsubscribe_url: links[0] }),
    }
  })

/** The address leaves the token's channel (idempotent); true when it was subscribed. */
export const unsubscribe = (c: TokenClaims, via: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const changed = yield* Effect.promise(() => repo.setPreference(sql, c.tenantId, c.email, c.channel, false))
    if (changed)
      yield* Effect.promise(() =>
        repo.addEvent(sql, {
          tenantId: c.tenantId,
          to: c.email,
          messageId: null,
          kind: "unsubscribed",
          channel: c.channel,
          detail: via,
        }),
      )
    return changed
  })

/**
 * The address rejoins the channel; a workspace-wide unsubscribe (from a provider's unsubscribe
 * event) is lifted too, since the person asked back in. Bounces and complaints stay.
 */
export const resubscribe = (c: TokenClaims) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* Effect.promise(() => repo.liftUnsubscribe(sql, c.tenantId, c.email))
    const changed = yield* Effect.promise(() => repo.setPreference(sql, c.tenantId, c.email, c.channel, true))
    if (changed)
      yield* Effect.promise(() =>
        repo.addEvent(sql, {
          tenantId: c.tenantId,
          to: c.email,
          messageId: null,
          kind: "resubscribed",
          channel: c.channel,
        }),
      )
    return changed
  })

export interface ChannelState {
  readonly channel: string
  readonly subscribed: boolean
  /** A token for this channel, for its toggle form. */
  readonly token: string
}

/** Every channel for the token's address (the token's own always listed) and any suppression. */
export const preferencesOf = (c: TokenClaims) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return yield* Effect.promise(async () => {
      const rows = await repo.preferences(sql, c.tenantId, c.email)
      if (!rows.some((r) => r.channel === c.channel)) {
        rows.push({ channel: c.channel, subscribed: true })
        rows.sort((a, b) => a.channel.localeCompare(b.channel))
      }
      const channels: ChannelState[] = []
      for (const r of rows)
        channels.push({
          ...r,
          token: await signToken(sql, { tenantId: c.tenantId, email: c.email, channel: r.channel }),
        })
      const suppressed = await repo.suppressions(sql, c.tenantId, c.email)
      return {
        channels,
        suppressed: suppressed.map((s) => ({ reason: s.reason, scope: s.tenant_id === 0 ? "global" : "workspace" })),
      }
    })
  })
