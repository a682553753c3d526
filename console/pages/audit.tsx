// The audit log (owners and admins): who changed the team, the API keys, the money settings or did
// another thing only owners and admins may, from where and when, newest first in pages of
// GET /audit, each entry as a sentence with its before/after on request.
import { Fragment } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { aRole } from "../access.js"
import { request } from "../api.js"
import { Button, ErrorText, Field } from "../ui.js"
import { humanize } from "../words.js"

interface AuditEvent {
  readonly id: number
  readonly at: string
  /** "user:<id>", "key:<id>" or "system". */
  readonly actor: string
  readonly actor_email: string | null
  readonly actor_role: string | null
  readonly ip: string | null
  readonly action: string
  readonly target: string | null
  readonly before: unknown
  readonly after: unknown
}

interface AuditPage {
  readonly events: ReadonlyArray<AuditEvent>
  readonly next_cursor: string | null
}

const PAGE = 50

/** The action filter: one prefix of the log's actions each. */
const SHOWN: ReadonlyArray<{ readonly prefix: string; readonly label: string }> = [
  { prefix: "", label: "Everything" },
  { prefix: "member.", label: "Members and invitations" },
  { prefix: "api_key.", label: "API keys" },
  { prefix: "autocharge.", label: "Money settings" },
  { prefix: "dsr.", label: "Data erasures" },
  { prefix: "route.", label: "Other owner and admin actions" },
]

type Obj = Readonly<Record<string, unknown>>
const obj = (v: unknown): Obj => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {})
const text = (v: unknown, otherwise = "—"): string =>
  typeof v === "string" && v !== "" ? v : typeof v === "number" ? String(v) : otherwise
const amount = (v: unknown) => (typeof v === "number" ? (v / 100).toFixed(2) : "—")

/** Other owner and admin requests, logged by method and path: the ones with a plain name. */
const ROUTES: ReadonlyArray<readonly [RegExp, (m: RegExpExecArray) => string]> = [
  [/^POST \/api\/workflows\/(\d+)\/retire$/, (m) => `retired workflow ${m[1]}`],
  [/^DELETE \/api\/workflows\/(\d+)$/, (m) => `deleted workflow ${m[1]}`],
  [/^DELETE \/api\/personas\//, () => "deleted a persona"],
  [/^DELETE \/kb\/rules\/(\d+)$/, (m) => `archived rule ${m[1]} of the agent's knowledge`],
  [/^DELETE \/api\/voice-avatars\//, () => "deleted a cloned voice"],
  [/^DELETE \/billing\/payment-methods\//, () => "removed a saved payment method"],
  [/^PUT \/api\/webhooks\/wallet-threshold$/, () => "changed the low-balance webhook threshold"],
  [/^(POST|PATCH|DELETE) \/api\/webhooks\//, () => "changed the webhook endpoints"],
  [/^DELETE \/onboarding\/credentials\/([^/]+)$/, (m) => `removed the ${m[1]} credentials`],
  [/^DELETE \/data\/sources\/(\d+)$/, (m) => `deleted data source ${m[1]}`],
  [/^DELETE \/storefront$/, () => "took the storefront down"],
  [/^(POST|DELETE) \/numbers\/(\d+)/, (m) => `released phone number ${m[2]}`],
]

/** What an entry records, as a sentence after the actor's name. */
export function whatHappened(e: AuditEvent): string {
  const before = obj(e.before)
  const after = obj(e.after)
  const who = text(after["email"], text(before["email"], e.target ?? "someone"))
  switch (e.action) {
    case "member.invited":
      return `invited ${who} as ${aRole(text(after["role"]))}`
    case "member.reinvited":
      return `invited ${who} again, as ${aRole(text(after["role"]))}`
    case "member.invitation_revoked":
      return `withdrew the invitation to ${who}`
    case "member.joined":
      return `joined as ${aRole(text(after["role"]))}`
    case "member.role_changed":
      return after["reason"] === "ownership transferred"
        ? "handed ownership on and became an admin"
        : `changed ${who}'s role from ${text(before["role"])} to ${text(after["role"])}`
    case "member.ownership_transferred":
      return `made ${who} the owner`
    case "member.removed":
      return `removed ${who} (${text(before["role"])})`
    case "member.left":
      return "left the workspace"
    case "api_key.created":
      return `created the API key “${text(after["name"])}” (${text(after["scope"])})`
    case "api_key.revoked":
      return `revoked the API key “${text(before["name"])}”`
    case "api_key.deleted":
      return `deleted the API key “${text(before["name"])}”`
    case "autocharge.updated":
      return after["enabled"] === true
        ? `turned autocharge on: add ${amount(after["amount_minor"])} when the balance falls under ` +
            amount(after["threshold_minor"])
        : "turned autocharge off"
    case "dsr.erased":
      return "erased a person's data on their request"
    case "workspace.renamed":
      return `renamed the workspace from “${text(before["name"])}” to “${text(after["name"])}”`
    case "compliance.attested":
      return `attested consent for campaign ${(e.target ?? "").replace(/^workflow:/, "")}: “${text(
        after["consent_attestation_text"],
      )}”`
  }
  if (e.action.startsWith("route.") && e.target !== null) {
    for (const [pattern, say] of ROUTES) {
      const m = pattern.exec(e.target)
      if (m !== null) return say(m)
    }
    return `made an owner-or-admin change: ${e.target}`
  }
  return `${humanize(e.action).toLowerCase()}${e.target === null ? "" : ` (${e.target})`}`
}

/** The actor as the log names them: an address and role, an API key, or the system. */
function actorText(e: AuditEvent): string {
  if (e.actor === "system") return "Parley"
  if (e.actor.startsWith("key:")) return `API key ${e.actor.slice(4)}${e.actor_role ? ` (${e.actor_role})` : ""}`
  return e.actor_email ?? e.actor
}

export function AuditPage() {
  const [prefix, setPrefix] = useState("")
  const [events, setEvents] = useState<ReadonlyArray<AuditEvent>>([])
  const [next, setNext] = useState<string | null>(null)
  const [loaded, setLoaded] = useState(false)
  const [loading, setLoading] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  // Only the newest read's answer is shown (a filter changed while a page was on its way).
  const reads = useRef(0)

  const load = async (cursor: string | null) => {
    const n = ++reads.current
    setLoading(true)
    setError(undefined)
    try {
      const q = new URLSearchParams({ limit: String(PAGE) })
      if (cursor !== null) q.set("cursor", cursor)
      if (prefix !== "") q.set("action", prefix)
      const p = await request<AuditPage>("GET", `/audit?${q}`)
      if (n !== reads.current) return
      setEvents((prev) => (cursor === null ? p.events : [...prev, ...p.events]))
      setNext(p.next_cursor)
      setLoaded(true)
    } catch (e) {
      if (n === reads.current) setError(e)
    } finally {
      if (n === reads.current) setLoading(false)
    }
  }
  useEffect(() => void load(null), [prefix])

  return (
    <section aria-labelledby="audit-h">
      <h1 id="audit-h">Audit log</h1>
      <p class="muted">
        Changes to the team, API keys and money settings, and everything else only owners and admins may do; newest
        first.
      </p>
      <div class="inline-form">
        <Field label="Show">
          {(id) => (
            <select id={id} value={prefix} onChange={(e) => setPrefix(e.currentTarget.value)}>
              {SHOWN.map((s) => (
                <option key={s.prefix} value={s.prefix}>
                  {s.label}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <ErrorText error={error} />
      {loaded && events.length === 0 && <p class="muted">Nothing recorded yet.</p>}
      {events.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Audit log, newest first</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Who</th>
                <th scope="col">What</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {events.map((e) => (
                <tr key={e.id}>
                  <td>{new Date(e.at).toLocaleString()}</td>
                  <td>
                    {actorText(e)}
                    {e.actor_role && !e.actor.startsWith("key:") && <span class="muted"> ({e.actor_role})</span>}
                  </td>
                  <td>
                    <span class="cell-prose">{whatHappened(e)}</span>
                    <Changes event={e} />
                  </td>
                  <td>{e.ip ?? "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {next !== null && (
        <Button busy={loading} onClick={() => void load(next)}>
          More
        </Button>
      )}
    </section>
  )
}

/** The entry's state before and after, as the log keeps it (secrets masked by the server). */
function Changes({ event: e }: { readonly event: AuditEvent }) {
  const parts = [
    ["Before", e.before],
    ["After", e.after],
  ].filter(([, v]) => v !== null && v !== undefined)
  if (parts.length === 0) return null
  return (
    <details>
      <summary>Details</summary>
      <dl class="kv">
        {parts.map(([name, v]) => (
          <Fragment key={String(name)}>
            <dt>{String(name)}</dt>
            <dd>
              <pre class="prewrap">{JSON.stringify(v, null, 2)}</pre>
            </dd>
          </Fragment>
        ))}
      </dl>
    </details>
  )
}
