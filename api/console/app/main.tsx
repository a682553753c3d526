// The console's entry: the shell (nav, sign-out), the hash router and the session. Pages talk to
// the public API only (./api.ts); the session is the httpOnly svc_session cookie set by sign-in.
//
// Accessible names the browser tests select by (keep them stable):
//   headings: "Campaigns", "Live calls", "Approvals", "Wallet", "Settings", "Reports", "Sign in";
//     on Campaigns "New workflow", the chosen workflow's name, "Rule book", "Opening line",
//     "Workflow settings", "Audience", "Consent"; on Approvals one card (article) per approval, headed
//     "<Concession|Callback|Escalation to a person> for <phone>"
//   nav links: "Campaigns", "Live", "Approvals", "Wallet", "Settings", "Reports"
//   buttons: "Sign in", "Email me a code", "Send code" (then "Send again"), "Verify code",
//     "Use a password", "Create an account" / "Create account", "Sign out", "Create workflow",
//     "Save changes", "Upload audience", "Attest consent", "Preview opening", "Run", "Pause",
//     "Retire" (then "Yes, retire" / "Keep it"), "Watch" / "Stop watching" (a live call's row;
//     the name ends with the phone number), "Close" and "Reconnect" (a transcript column), "Approve", "Deny"
//   fields (labels): "Email", "Password", "Code", "Prompt", "Name", "Persona", "Voice",
//     "Schedule", "From", "Until", "Time zone", "Start at", "Audience CSV", "Consent statement", "Note"
//   other: the upload's progress bar "Upload progress"; the opening line's audio "Opening line preview";
//     a transcript column is a region "Transcript of the call to <phone>" with an ordered list "Turns"
//     and, once the ended call is analysed, a region "Analysis"
import { render } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { onSessionExpired, request } from "./api.js"
import { ApprovalsPage } from "./pages/approvals.js"
import { CampaignsPage } from "./pages/campaigns.js"
import { forgetWatched, LivePage } from "./pages/live.js"
import { ReportsPage } from "./pages/reports.js"
import { SettingsPage } from "./pages/settings.js"
import { type Me, SignInPage } from "./pages/signin.js"
import { WalletPage } from "./pages/wallet.js"
import { Button } from "./ui.js"

const PAGES = [
  { hash: "#/campaigns", label: "Campaigns", page: CampaignsPage },
  { hash: "#/live", label: "Live", page: LivePage },
  { hash: "#/approvals", label: "Approvals", page: ApprovalsPage },
  { hash: "#/wallet", label: "Wallet", page: WalletPage },
  { hash: "#/settings", label: "Settings", page: SettingsPage },
  { hash: "#/reports", label: "Reports", page: ReportsPage },
] as const

const SIGN_IN = "#/signin"

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
  const [session, setSession] = useState<Session>({ state: "checking" })
  // Where to return after signing in when a session ran out mid-page.
  const [after, setAfter] = useState<string>("#/campaigns")

  useEffect(() => {
    request<Me>("GET", "/auth/me").then(
      (me) => setSession({ state: "in", me }),
      () => setSession({ state: "out" }),
    )
    return onSessionExpired(() => setSession({ state: "out" }))
  }, [])

  // However the session ended (signed out, expired, revoked elsewhere), what was watched goes with
  // it: the next session may be another workspace's.
  useEffect(() => {
    if (session.state === "out") forgetWatched()
  }, [session])

  useEffect(() => {
    if (session.state === "out" && hash !== SIGN_IN) {
      if (hash.startsWith("#/")) setAfter(hash)
      go(SIGN_IN)
    }
    if (session.state === "in" && (hash === SIGN_IN || !PAGES.some((p) => p.hash === hash))) go(after)
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

  if (session.state === "checking")
    return (
      <main id="main" class="loading">
        <p>Loading…</p>
      </main>
    )
  if (session.state === "out")
    return (
      <main id="main" class="signin">
        <SignInPage onSignedIn={(me) => setSession({ state: "in", me })} />
      </main>
    )

  const current = PAGES.find((p) => p.hash === hash) ?? PAGES[0]
  const Page = current.page
  const signOut = () => {
    // Cleared on the server (the session is revoked everywhere) whatever the answer.
    request("POST", "/auth/logout").finally(() => {
      setAfter("#/campaigns")
      setSession({ state: "out" })
    })
  }
  return (
    <>
      {/* A button, not a link: "#main" would be taken for a route. */}
      <button type="button" class="skip" onClick={() => document.getElementById("main")?.focus()}>
        Skip to content
      </button>
      <header class="shell">
        <span class="brand">Parley</span>
        <nav aria-label="Console">
          <ul>
            {PAGES.map((p) => (
              <li key={p.hash}>
                <a href={p.hash} aria-current={p === current ? "page" : undefined}>
                  {p.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          <span class="muted">{session.me.user?.email ?? ""}</span>
          <Button onClick={signOut}>Sign out</Button>
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        <Page />
      </main>
    </>
  )
}

render(<App />, document.getElementById("app")!)
