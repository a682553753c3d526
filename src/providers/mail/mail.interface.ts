// The mail provider contract: one rendered message in, the provider's message id out. The outbox
// simulator and the HTTP adapter for a real mail API implement the same interface.

import { ProviderCallError } from "../http.util.js"

/** What the server asks a provider to deliver; rendering happens before this point. */
export interface OutgoingMail {
  to: string
  subject: string
  text: string
  html: string
  /** Every link the message carries (verification, reset), so tests and operators can find them. */
  links: string[]
  /** What the message is for, e.g. "verify_email" or "otp"; real providers receive it as a tag. */
  kind: string
  /** Extra message headers (List-Unsubscribe, List-Unsubscribe-Post on outreach mail). */
  headers?: Readonly<Record<string, string>>
  /**
   * Whose mail it is, when a workspace's: the From's display name becomes "<name> via <ours>"; the
   * address stays the deployment's (MAIL_FROM), so its domain's SPF and DKIM still hold.
   */
  senderName?: string
}

/**
 * MAIL_FROM with the display name of the workspace a message is from: `"Acme via Parley"
 * <no-reply@…>`. Quotes, backslashes and line breaks are dropped from the name (no header
 * injection) and it is cut to 64 characters.
 */
export function fromOnBehalf(mailFrom: string, senderName: string | undefined): string {
  if (senderName === undefined) return mailFrom
  const m = /^\s*(.*?)\s*<([^<>]+)>\s*$/.exec(mailFrom)
  const address = (m?.[2] ?? mailFrom).trim()
  const ours = (m?.[1] ?? "").replace(/^"|"$/g, "").trim() || "Parley"
  const name = senderName
    .replace(/["\\\p{Cc}]/gu, "")
    .trim()
    .slice(0, 64)
  return name === "" ? mailFrom : `"${name} via ${ours}" <${address}>`
}

export interface MailProvider {
  /** Short stable name ("outbox", "http") for status reports and logs. */
  readonly name: string
  /** Resolves once the provider has accepted the message; rejects with MailDeliveryError. */
  send(mail: OutgoingMail): Promise<{ id: string }>
}

export class MailDeliveryError extends ProviderCallError {
  override readonly name = "MailDeliveryError"
}
