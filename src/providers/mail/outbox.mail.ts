// The outbox mail simulator: every message becomes one JSON line in a local file, so signup and
// OTP flows work with no mail account and tests (or a developer) read the links and codes back.
import { randomUUID } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { mkdir, open } from "node:fs/promises"
import { dirname } from "node:path"
import { MailDeliveryError, type MailProvider, type OutgoingMail } from "./mail.interface.js"

/** One line of the outbox file. */
export interface OutboxLine {
  readonly id: string
  readonly to: string
  readonly subject: string
  readonly text: string
  readonly html: string
  readonly links: string[]
  readonly kind: string
  /** Extra headers, when the message has any (List-Unsubscribe on outreach mail). */
  readonly headers?: Readonly<Record<string, string>>
  /** The workspace the message is from, when it is a workspace's (the From's display name). */
  readonly sender_name?: string
  /** When the message was written, ISO 8601. */
  readonly at: string
}

export function makeOutboxMail(file: string): MailProvider {
  return {
    name: "outbox",
    async send(mail: OutgoingMail): Promise<{ id: string }> {
      const line: OutboxLine = {
        id: randomUUID(),
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
        links: [...mail.links],
        kind: mail.kind,
        ...(mail.headers !== undefined && { headers: { ...mail.headers } }),
        ...(mail.senderName !== undefined && { sender_name: mail.senderName }),
        at: new Date().toISOString(),
      }
      // JSON.stringify escapes newlines inside strings, so the record is exactly one line.
      const bytes = Buffer.from(`${JSON.stringify(line)}\n`, "utf8")
      try {
        await mkdir(dirname(file), { recursive: true })
        // One write(2) on an O_APPEND descriptor: the kernel places the whole buffer at the end
        // of the file in one step, so concurrent senders (in this process or in another one
        // sharing the file) never interleave. fs.appendFile would not promise this: it may split
        // a large buffer over several writes.
        const handle = await open(file, "a")
        try {
          const { bytesWritten } = await handle.write(bytes, 0, bytes.length)
          if (bytesWritten !== bytes.length) {
            throw new Error(`short write to the outbox (${bytesWritten} of ${bytes.length} bytes)`)
          }
        } finally {
          await handle.close()
        }
      } catch (e) {
        throw new MailDeliveryError(`could not write to the outbox ${file}: ${(e as Error).message}`, true, {
          cause: e,
        })
      }
      return { id: line.id }
    },
  }
}

/**
 * Every message in an outbox file, oldest first; an absent file is an empty outbox. A line that
 * is not a message throws: the simulator only ever appends whole lines, so it means corruption.
 */
export function readOutbox(file: string): Array<OutboxLine> {
  if (!existsSync(file)) return []
  const out: OutboxLine[] = []
  const lines = readFileSync(file, "utf8").split("\n")
  for (const [i, raw] of lines.entries()) {
    if (raw.trim() === "") continue
    let parsed: unknown
    try {
      parsed = JSON.parse(raw)
    } catch {
      throw new Error(`${file}:${i + 1}: not a JSON line`)
    }
    if (!isOutboxLine(parsed)) throw new Error(`${file}:${i + 1}: not an outbox message`)
    out.push(parsed)
  }
  return out
}

function isOutboxLine(v: unknown): v is OutboxLine {
  if (typeof v !== "object" || v === null) return false
  const o = v as Record<string, unknown>
  return (
    ["id", "to", "subject", "text", "html", "kind", "at"].every((k) => typeof o[k] === "string") &&
    Array.isArray(o.links) &&
    o.links.every((l) => typeof l === "string")
  )
}
