// The console's entry: the shell (nav, sign-out), the hash router and the session. Pages talk to
// the public API only (./api.ts); the session is the httpOnly svc_session cookie set by sign-in (or
// by accepting an invitation on #/join, the one page besides sign-in open to a signed-out visitor).
//
// Accessible names the browser tests select by (keep them stable):
//   headings: "Campaigns", "Live calls", "Approvals", "Wallet", "Settings", "Reports", "Members",
//     "Webhooks", "Audit log", "Sign in", "Join <workspace> as <a role>" (the join page; "Invitation
//     not valid" for a bad link); on Campaigns "New workflow", the chosen workflow's name (then its
//     status in words), "Runs", "Runs and results", "Rule book", "Opening line", "Workflow settings",
//     "Audience", "Consent", "Run <id>: <status> — <n> of <total> done|called" (the Overview's progress);
//     on Approvals the sections "On hold now" and "After the call", one card (article) per approval,
//     headed "<Concession|Callback|Escalation to a person> for <name> (<phone>)" (or "… for <phone>"
//     without a name); on Webhooks one card (article) per endpoint, headed by its URL
//   tabs (a campaign's sections): "Overview", "Audience", "Rule book", "Consent", "Settings", "Results",
//     "Analytics" (its range "First day" and "Last day", a region per experiment named by its name);
//     on Approvals "Waiting", "Decided"
//   nav links: "Campaigns", "Live", "Approvals" (described by "<n> waiting for a decision" while any
//     wait), "Wallet", "Settings", "Reports", "Members", "Webhooks", "Audit log" (only for owners and
//     admins); what a role may not do is not shown (access.ts, GET /auth/me)
//   buttons: "Sign in", "Email me a code", "Send code" (then "Send again"), "Verify code",
//     "Use a password", "Create an account" / "Create account", "Sign out", "Send the link again" (the
//     verify-email banner), "Create workflow", "Save changes", "Upload audience", "Attest consent",
//     "Save opening line", "Preview opening", "Run", "Pause", "Retire" (then "Yes, retire" / "Keep it"),
//     "Show results", "Open the call to <name or phone>" (a results row), "Close" (the call drawer),
//     "Watch" / "Stop watching" and "Listen" / "Stop listening" (a live call's row; the name ends with the
//     phone number), "Close" and "Reconnect" (a transcript column), "Stop listening" / "Close" (the call
//     listened to), "Approve", "Deny" (after the call they say what they do:
//     "Approve: record $10.00 as agreed", "Deny: record as denied", …); on Settings "Save name"; on Members "Send
//     invitation", "Resend <email>", "Revoke <email>", "Remove <email>" (then "Yes, remove"), "Make owner
//     <email>" (then "Yes, make owner"), "Cancel", "Leave workspace" (then "Yes, leave"); on Webhooks "Add
//     endpoint", "Send test ping", "New signing secret", "Turn off" / "Turn on", "Delete" (then "Yes,
//     delete"), "Show deliveries", "Refresh deliveries", "Retry delivery <id>"; on the join page "Join
//     workspace"; on the audit log "More"
//   fields (labels): "Email", "Password", "Company or workspace name (optional)", "Code", "Prompt",
//     "Search campaigns", "Status", "Name", "Persona", "Voice", "Schedule", "From", "Until", "Time zone",
//     "Start at", "Audience CSV", "What the agent says first", "Consent statement" and the checkbox "I
//     confirm every number in this audience gave consent as described", "Search by name or phone",
//     "Outcome", "Attempt", "Note", "Amount to approve (<currency>)", "Campaign" (Approvals); "Workspace
//     name" (Settings); on Members
//     "Email" and "Role" (the invitation), "Role of <email>" (a member's row); on the join page
//     "Password" and "Name (optional)"; on Webhooks "Endpoint URL", "Description (optional)" and the
//     events' checkboxes; on the audit log "Show"
//   other: the verify-email banner is a region "Verify your email"; the upload's progress bar "Upload
//     progress"; the opening line's audio "Opening line preview"; each table sits in a region named
//     as its caption; the call drawer is a dialog "Call to <name> (<phone>)" with an ordered list
//     "Turns" and a region "Analysis"; a transcript column is a region "Transcript of the call to
//     <phone>" with an ordered list "Turns" and, once the ended call is analysed, a region "Analysis";
//     Live's calls are a region "Calls in flight", the call listened to a region "Listening to the call to
//     <phone>" (data-samples-decoded, data-samples-played), a held call's decision a region "Decision for <name>
//     (<phone>)", its time left a timer; a campaign's outcome counts a list "Outcomes"
import { type ComponentType, render } from "preact"
import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import { type Access, AccessContext, holds, type Me, type Permission } from "./access.js"
import { onRoleRefused, onSessionExpired, request } from "./api.js"
import { startApprovalsFeed, usePendingCount } from "./approvals-feed.js"
import { ApprovalsPage } from "./pages/approvals.js"
import { AuditPage } from "./pages/audit.js"
import { CampaignsPage } from "./pages/campaigns.js"
import { JoinPage } from "./pages/join.js"
import { forgetWatched, LivePage } from "./pages/live.js"
import { MembersPage } from "./pages/members.js"
import { ReportsPage } from "./pages/reports.js"
import { SettingsPage } from "./pages/settings.js"
import { SignInPage } from "./pages/signin.js"
import { WalletPage } from "./pages/wallet.js"
import { WebhooksPage } from "./pages/webhooks.js"
import { Button } from "./ui.js"
import { VerifyBanner } from "./verify-banner.js"

interface PageEntry {
  readonly hash: string
  readonly label: string
  readonly page: ComponentType
  /** Shown (and reachable) only with this permission. */
  readonly need?: Permission
}

/** The Approvals tab, which carries the pending count. */
const APPROVALS = "#/approvals"

const PAGES: ReadonlyArray<PageEntry> = [
  { hash: "#/campaigns", label: "Campaigns", page: CampaignsPage },
  { hash: "#/live", label: "Live", page: LivePage },
  { hash: APPROVALS, label: "Approvals", page: ApprovalsPage },
  { hash: "#/wallet", label: "Wallet", page: WalletPage },
  { hash: "#/settings", label: "Settings", page: SettingsPage },
  { hash: "#/reports", label: "Reports", page: ReportsPage },
  { hash: "#/members", label: "Members", page: MembersPage },
  { hash: "#/webhooks", label: "Webhooks", page: WebhooksPage },
  { hash: "#/audit", label: "Audit log", page: AuditPage, need: "admin" },
]

const SIGN_IN = "#/signin"
const HOME = "#/campaigns"
/** The invitation link's page: #/join?token=… */
const JOIN = "#/join"

/** A hash without its query: "#/join?token=x" → "#/join". */
const routeOf = (hash: string): string => hash.split("?", 1)[0] ?? ""
const queryOf = (hash: string): URLSearchParams => new URLSearchParams(hash.slice(hash.indexOf("?") + 1 || hash.length))

const pageFor = (hash: string, me: Me): PageEntry | undefined =>
  PAGES.find((p) => p.hash === hash && (p.need === undefined || holds(me, p.need)))

function useHash(): string {
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const on = () => setHash(location.hash)
    addEventListener("hashchange", on)
    return () => removeEventListener("hashchange", on)
  }, [])
  return hash
}

function go(hash: string): void {
  if (location.hash !== hash) location.hash = hash
}

type Session = { readonly state: "checking" } | { readonly state: "out" } | { readonly state: "in"; readonly me: Me }

function App() {
  const hash = useHash()
  const route = routeOf(hash)
  const [session, setSession] = useState<Session>({ state: "checking" })
  // Where to return after signing in when a session ran out mid-page.
  const [after, setAfter] = useState<string>(HOME)

  // Reads who is signed in again: a 401 signs the page out (onSessionExpired); anything else keeps
  // what is shown.
  const refresh = () =>
    request<Me>("GET", "/auth/me").then(
      (me) => setSession({ state: "in", me }),
      () => undefined,
    )

  useEffect(() => {
    request<Me>("GET", "/auth/me").then(
      (me) => setSession({ state: "in", me }),
      () => setSession({ state: "out" }),
    )
    const offExpired = onSessionExpired(() => setSession({ state: "out" }))
    // A refusal for the role means the page's idea of it is stale (changed by an admin meanwhile).
    const offRefused = onRoleRefused(() => void refresh())
    return () => {
      offExpired()
      offRefused()
    }
  }, [])

  // However the session ended (signed out, expired, revoked elsewhere), what was watched goes with
  // it: the next session may be another workspace's.
  useEffect(() => {
    if (session.state === "out") forgetWatched()
  }, [session])
  // The approvals feed (the Approvals tab's pending count, pages' live queues) runs while signed in.
  const signedIn = session.state === "in"
  useEffect(() => (signedIn ? startApprovalsFeed() : undefined), [signedIn])

  useEffect(() => {
    // The invitation's page is open signed in or out; it moves on by itself once accepted.
    if (route === JOIN) return
    if (session.state === "out" && hash !== SIGN_IN) {
      if (hash.startsWith("#/")) setAfter(hash)
      go(SIGN_IN)
    }
    // Signed in: a page this role may not open (or none) is the page asked for before, or the first.
    if (session.state === "in" && (hash === SIGN_IN || pageFor(hash, session.me) === undefined))
      go(pageFor(after, session.me) ? after : HOME)
  }, [session, hash, after])

  // When the session's time is up, say so at once rather than at the next click: ask the API then
  // (a 401 there signs the page out through onSessionExpired).
  const expiresAt = session.state === "in" ? session.me.expires_at : undefined
  useEffect(() => {
    if (!expiresAt) return
    const wait = Date.parse(expiresAt) - Date.now() + 1_000
    // setTimeout overflows past ~24.8 days; a session that long is re-checked on use anyway.
    if (!(wait > 0 && wait < 2 ** 31 - 1)) return
    const t = setTimeout(() => request("GET", "/auth/me").catch(() => undefined), wait)
    return () => clearTimeout(t)
  }, [expiresAt])

  // A new page takes the focus to its content, as a page load would, so a keyboard or screen reader
  // user starts there rather than on the link just followed.
  const first = useRef(true)
  useEffect(() => {
    if (first.current) first.current = false
    else document.getElementById("main")?.focus()
  }, [hash])

  const me = session.state === "in" ? session.me : undefined
  const access = useMemo<Access | undefined>(() => me && { me, refresh }, [me])

  if (session.state === "checking")
    return (
      <main id="main" class="loading">
        <p>Loading…</p>
      </main>
    )
  if (route === JOIN)
    return (
      <main id="main" class="signin">
        {/* Keyed by the token: another link opened in the same tab starts afresh. */}
        <JoinPage
          key={queryOf(hash).get("token") ?? ""}
          token={queryOf(hash).get("token") ?? ""}
          signedInAs={me?.user?.email}
          onJoined={(joined) => {
            setAfter(HOME)
            setSession({ state: "in", me: joined })
            // Replaced, not pushed: the used link's token leaves the tab's history.
            location.replace(HOME)
          }}
        />
      </main>
    )
  if (session.state === "out" || access === undefined)
    return (
      <main id="main" class="signin">
        <SignInPage onSignedIn={(signedIn) => setSession({ state: "in", me: signedIn })} />
      </main>
    )

  const shown = PAGES.filter((p) => p.need === undefined || holds(session.me, p.need))
  const current = pageFor(hash, session.me) ?? shown[0]!
  const Page = current.page
  const signOut = () => {
    // Cleared on the server (the session is revoked everywhere) whatever the answer.
    request("POST", "/auth/logout").finally(() => {
      setAfter(HOME)
      setSession({ state: "out" })
    })
  }
  return (
    <AccessContext.Provider value={access}>
      {/* A button, not a link: "#main" would be taken for a route. */}
      <button type="button" class="skip" onClick={() => document.getElementById("main")?.focus()}>
        Skip to content
      </button>
      <header class="shell">
        <span class="brand">Parley</span>
        <nav aria-label="Console">
          <ul>
            {shown.map((p) => (
              <li key={p.hash}>
                {p.hash === APPROVALS ? (
                  <ApprovalsLink current={p === current} />
                ) : (
                  <a href={p.hash} aria-current={p === current ? "page" : undefined}>
                    {p.label}
                  </a>
                )}
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          <span class="muted">
            {session.me.user?.email ?? ""}
            {session.me.user?.role && <span data-testid="role"> · {session.me.user.role}</span>}
          </span>
          <Button onClick={signOut}>Sign out</Button>
        </span>
      </header>
      <VerifyBanner />
      <main id="main" tabIndex={-1}>
        <Page />
      </main>
    </AccessContext.Provider>
  )
}

/**
 * The Approvals tab with the workspace's pending count, pushed by the approvals feed (so it shows on
 * every page, without a reload). The count is the link's description, not its name: the tab is
 * still called "Approvals".
 */
function ApprovalsLink({ current }: { readonly current: boolean }) {
  const pending = usePendingCount()
  const waiting = pending !== undefined && pending > 0
  return (
    <a
      href={APPROVALS}
      aria-current={current ? "page" : undefined}
      aria-describedby={waiting ? "pending-count-words" : undefined}
    >
      Approvals
      {waiting && (
        <>
          <span class="nav-count" data-testid="pending-count" aria-hidden="true">
            {pending > 99 ? "99+" : pending}
          </span>
          {/* Hidden, so not part of the name; a description may still point at it. */}
          <span id="pending-count-words" hidden>
            {pending} waiting for a decision
          </span>
        </>
      )}
    </a>
  )
}

render(<App />, document.getElementById("app")!)
