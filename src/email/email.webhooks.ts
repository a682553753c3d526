// Delivery events from the mail providers (mail_a, mail_b), each applied once:
// - delivered / opened / clicked move the message (opened and clicked imply delivered);
// - a hard bounce or a complaint suppresses the address in every workspace at once (the address
//   is dead or its owner calls us spam: no workspace of this platform should mail it again);
// - an unsubscribe suppresses the address in the workspace that sent the message;
// - soft bounces are counted per address; the SOFT_BOUNCE_LIMIT-th suppresses it everywhere;
// - an event about a message id we never sent is acknowledged and recorded (hard bounces and
//   complaints about it still suppress the address, which the event names).
// Dedup key: the provider's event id when it sends one, else message id + event + ts.
import { Effect } from "effect"
import { Db, type Tx } from "../platform/Db.js"
import * as repo from "./email.repo.js"
import { normaliseEmail } from "./email.service.js"

export const SOFT_BOUNCE_LIMIT = 3
export const MAX_EVENTS = 1000

export type MailEventKind =
  | "delivered"
  | "opened"
  | "clicked"
  | "hard_bounce"
  | "soft_bounce"
  | "complaint"
  | "unsubscribe"
  | "replied"
  | "other"

const str = (v: unknown): string | undefined =>
  typeof v === "string" && v.trim() !== "" ? v.trim() : typeof v === "number" ? String(v) : undefined

/** What an event means, from its name and (for bounces) its status / type / reason. */
export function classify(ev: Readonly<Record<string, unknown>>): MailEventKind {
  const name = (str(ev["event"]) ?? "").toLowerCase().replace(/[\s-]/g, "_")
  const status = str(ev["status"]) ?? ""
  const hint = `${str(ev["type"]) ?? ""} ${str(ev["bounce_type"]) ?? ""} ${str(ev["reason"]) ?? ""}`.toLowerCase()
  switch (name) {
    case "delivered":
    case "delivery":
      return "delivered"
    case "open":
    case "opened":
      return "opened"
    case "click":
    case "clicked":
      return "clicked"
    case "soft_bounce":
    case "softbounce":
    case "deferred":
      return "soft_bounce"
    case "hard_bounce":
    case "hardbounce":
      return "hard_bounce"
    case "bounce":
    case "bounced":
      return /^4/.test(status) || /\bsoft\b|transient|temporary/.test(hint) ? "soft_bounce" : "hard_bounce"
    case "complaint":
    case "complained":
    case "spam":
    case "spamreport":
    case "spam_report":
      return "complaint"
    case "unsubscribe":
    case "unsubscribed":
      return "unsubscribe"
    case "reply":
    case "replied":
      return "replied"
    default:
      return "other"
  }
}

export interface WebhookResult {
  readonly received: number
  readonly processed: number
  readonly duplicates: number
  readonly unknown_messages: number
}

/** Applies a batch (already authenticated and shaped as objects with an `event`). */
export const applyMailEvents = (provider: "mail_a" | "mail_b", events: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return yield* Effect.promise(async () => {
      let processed = 0
      let duplicates = 0
      let unknown = 0
      for (const ev of events) {
        // One transaction per event: its dedup row and its effects land together or not at all.
        const r = await sql.begin((tx) => applyOne(tx, provider, ev))
        if (r === "duplicate") duplicates++
        else {
          processed++
          if (r === "unknown") unknown++
        }
      }
      return { received: events.length, processed, duplicates, unknown_messages: unknown } satisfies WebhookResult
    })
  })

async function applyOne(
  sql: Tx,
  provider: string,
  ev: Readonly<Record<string, unknown>>,
): Promise<"applied" | "unknown" | "duplicate"> {
  const event = str(ev["event"]) ?? ""
  const msgId = str(ev["message-id"]) ?? str(ev["msgid"]) ?? str(ev["message_id"]) ?? str(ev["messageId"])
  const rawEmail = str(ev["email"]) ?? str(ev["to"]) ?? str(ev["recipient"])
  const ts = str(ev["ts"]) ?? str(ev["timestamp"]) ?? ""
  const eventId = str(ev["id"]) ?? str(ev["event_id"]) ?? str(ev["event-id"])
  const dedupKey = (eventId !== undefined ? `id:${eventId}` : `m:${msgId ?? rawEmail ?? ""}|${event}|${ts}`).slice(
    0,
    500,
  )
  const message = msgId === undefined ? undefined : await repo.messageByProviderId(sql, msgId)
  const email = message?.to_email ?? (rawEmail === undefined ? undefined : normaliseEmail(rawEmail))
  const fresh = await repo.recordWebhookEvent(sql, {
    provider,
    dedupKey,
    event,
    email: email ?? null,
    providerMessageId: msgId ?? null,
    known: message !== undefined,
    payload: ev,
  })
  if (!fresh) return "duplicate"
  const kind = classify(ev)
  const reason = str(ev["reason"])?.slice(0, 300)
  const log = async (k: string, detail?: string) => {
    if (message !== undefined)
      await repo.addEvent(sql, {
        tenantId: message.tenant_id,
        to: message.to_email,
        messageId: message.id,
        kind: k,
        channel: message.channel,
        ...(detail !== undefined && { detail }),
      })
  }
  switch (kind) {
    case "delivered":
    case "opened":
    case "clicked":
      if (message !== undefined) await repo.applyDeliveryEvent(sql, message.id, kind)
      await log(kind)
      break
    case "hard_bounce":
      if (email !== undefined) await repo.suppress(sql, repo.GLOBAL_TENANT, email, "hard_bounce", provider)
      if (message !== undefined) await repo.applyDeliveryEvent(sql, message.id, "bounced")
      await log("bounced", reason)
      break
    case "complaint":
      if (email !== undefined) await repo.suppress(sql, repo.GLOBAL_TENANT, email, "complaint", provider)
      if (message !== undefined) await repo.applyDeliveryEvent(sql, message.id, "complained")
      await log("complained", reason)
      break
    case "soft_bounce":
      if (email !== undefined) {
        const n = await repo.countSoftBounce(sql, email)
        if (n >= SOFT_BOUNCE_LIMIT) await repo.suppress(sql, repo.GLOBAL_TENANT, email, "soft_bounce", provider)
      }
      await log("soft_bounced", reason)
      break
    case "unsubscribe":
      if (message !== undefined) {
        await repo.suppress(sql, message.tenant_id, message.to_email, "unsubscribe", provider)
        await log("unsubscribed", provider)
      }
      break
    case "replied":
      await log("replied")
      if (message !== undefined) await repo.recordReply(sql, message.id)
      break
    case "other":
      break
  }
  return message === undefined ? "unknown" : "applied"
}
