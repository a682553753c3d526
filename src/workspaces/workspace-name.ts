// The workspace's name: what callees hear ("… calling from <name>"), what invitations and emails
// say. Asked at signup (optional), editable by owners and admins; when not given, derived from what
// the signup says about the business: the email's domain for a company address
// (ops@acme-dental.com → "Acme Dental"), else the person's name ("Asha Rao's workspace").

/** Domains that say nothing about the business: personal mailboxes and the reserved example domains. */
const PERSONAL_MAIL = new Set([
  "gmail.com",
  "googlemail.com",
  "yahoo.com",
  "yahoo.co.in",
  "yahoo.co.uk",
  "ymail.com",
  "outlook.com",
  "hotmail.com",
  "hotmail.co.uk",
  "live.com",
  "msn.com",
  "icloud.com",
  "me.com",
  "mac.com",
  "aol.com",
  "proton.me",
  "protonmail.com",
  "pm.me",
  "gmx.com",
  "gmx.net",
  "mail.com",
  "zoho.com",
  "zohomail.in",
  "yandex.com",
  "rediffmail.com",
  "fastmail.com",
  "hey.com",
  "tutanota.com",
  "example.com",
  "example.org",
  "example.net",
])

/** Second-level labels under a country code ("acme.co.uk"): the business is the label before. */
const SECOND_LEVEL = new Set(["co", "com", "net", "org", "gov", "ac", "edu", "ltd", "plc"])

export const WORKSPACE_NAME_MAX = 80

/** Trims, collapses white space and removes control characters; undefined when nothing is left. */
export function cleanWorkspaceName(raw: string): string | undefined {
  const cleaned = raw
    .replace(/\p{Cc}/gu, " ")
    .replace(/\s+/g, " ")
    .trim()
  return cleaned === "" ? undefined : cleaned.slice(0, WORKSPACE_NAME_MAX)
}

const titleCase = (words: string): string =>
  words
    .split(/[-_.\s]+/)
    .filter((w) => w !== "")
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join(" ")

/** The business a company address belongs to, or undefined for a personal mailbox. */
export function businessOfEmail(email: string): string | undefined {
  const domain = email.slice(email.lastIndexOf("@") + 1).toLowerCase()
  if (PERSONAL_MAIL.has(domain)) return undefined
  const labels = domain.split(".").filter((l) => l !== "")
  if (labels.length < 2) return undefined
  let i = labels.length - 2
  if (labels.length >= 3 && labels[labels.length - 1]!.length === 2 && SECOND_LEVEL.has(labels[i]!)) i--
  const label = labels[i]!
  if (!/^[a-z0-9-]{2,}$/.test(label) || /^\d+$/.test(label)) return undefined
  return titleCase(label)
}

/** The name a new workspace gets: the one asked for, else the business of a company address, else the person's. */
export function defaultWorkspaceName(input: { workspaceName?: string; email: string; fullName?: string }): string {
  const asked = input.workspaceName === undefined ? undefined : cleanWorkspaceName(input.workspaceName)
  if (asked !== undefined) return asked
  const business = businessOfEmail(input.email)
  if (business !== undefined) return business
  const person = input.fullName === undefined ? undefined : cleanWorkspaceName(input.fullName)
  const who = person ?? titleCase(input.email.slice(0, input.email.indexOf("@")))
  return cleanWorkspaceName(`${who}'s workspace`) ?? "My workspace"
}
