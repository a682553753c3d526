// Joining a workspace by its emailed invitation link (#/join?token=…), signed out: the link is
// inspected (POST /auth/invitations/inspect) to say which workspace and role it is for, then
// accepted with a password of the invitee's choosing (POST /auth/invitations/accept), which sets
// the svc_session cookie like a sign-in.
import { useEffect, useState } from "preact/hooks"
import { aRole, type Me } from "../access.js"
import { ApiError, describe, request } from "../api.js"
import { Button, ErrorText, Field } from "../ui.js"

interface Invitation {
  readonly email: string
  readonly role: string
  readonly workspace: { readonly id: number; readonly name: string }
  readonly expires_at: string
}

/** Why a link cannot be used, in words. */
function linkProblem(e: unknown): string | undefined {
  if (!(e instanceof ApiError)) return undefined
  if (e.code === "TOKEN_EXPIRED")
    return "This invitation has expired: links work for 7 days. Ask the person who invited you to send it again."
  if (e.code === "INVALID_TOKEN" || (e.code === "VALIDATION_FAILED" && e.field === "token"))
    return (
      "This invitation link cannot be used: it was already used, withdrawn, or copied incompletely. " +
      "If you already joined, sign in; otherwise ask for a new invitation."
    )
  return undefined
}

/** A link with no token in it reads like one never issued. */
const noToken = new ApiError(400, "INVALID_TOKEN", "")

export function JoinPage({
  token,
  signedInAs,
  onJoined,
}: {
  readonly token: string
  /** The address of a session already open in this browser: joining replaces it. */
  readonly signedInAs: string | undefined
  readonly onJoined: (me: Me) => void
}) {
  const [invitation, setInvitation] = useState<Invitation | undefined>(undefined)
  const [problem, setProblem] = useState<string | undefined>(token === "" ? linkProblem(noToken) : undefined)
  const [loadError, setLoadError] = useState<unknown>(undefined)
  const [name, setName] = useState("")
  const [password, setPassword] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)

  useEffect(() => {
    if (token === "") return
    let live = true
    request<Invitation>("POST", "/auth/invitations/inspect", { token }).then(
      (i) => live && setInvitation(i),
      (e: unknown) => {
        if (!live) return
        const p = linkProblem(e)
        if (p === undefined) setLoadError(e)
        else setProblem(p)
      },
    )
    return () => {
      live = false
    }
  }, [token])

  const join = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    if (password.length < 10) {
      setError(new ApiError(422, "VALIDATION_FAILED", "Choose a password of at least 10 characters.", "password"))
      return
    }
    setBusy(true)
    try {
      const body = name.trim() === "" ? { token, password } : { token, password, full_name: name.trim() }
      await request("POST", "/auth/invitations/accept", body)
      // The session is the cookie the answer set; /auth/me confirms the browser kept it.
      onJoined(await request<Me>("GET", "/auth/me"))
    } catch (err) {
      const p = linkProblem(err)
      if (p !== undefined) setProblem(p)
      else setError(err)
    } finally {
      setBusy(false)
    }
  }

  if (problem !== undefined)
    return (
      <section aria-labelledby="join-h">
        <h1 id="join-h">Invitation not valid</h1>
        <p class="error" role="alert">
          {problem}
        </p>
        <p>
          <a href="#/signin">Go to sign in</a>
        </p>
      </section>
    )
  if (invitation === undefined)
    return (
      <section aria-labelledby="join-h">
        <h1 id="join-h">Join a workspace</h1>
        {loadError === undefined ? <p>Checking the invitation…</p> : <ErrorText error={loadError} />}
      </section>
    )

  const passwordError = error instanceof ApiError ? error.fieldError("password") : undefined
  const nameError = error instanceof ApiError ? error.fieldError("full_name") : undefined
  const other = passwordError === undefined && nameError === undefined ? error : undefined
  return (
    <section aria-labelledby="join-h">
      <h1 id="join-h">
        Join {invitation.workspace.name || "the workspace"} as {aRole(invitation.role)}
      </h1>
      <p>
        You were invited as <strong>{invitation.email}</strong>. Choose a password to join; you will sign in with this
        address from now on. The invitation is valid until {new Date(invitation.expires_at).toLocaleString()}.
      </p>
      {signedInAs !== undefined && (
        <p class="hint">
          This browser is signed in as {signedInAs}. Joining signs it in as {invitation.email} instead.
        </p>
      )}
      <form onSubmit={join} noValidate>
        {/* The address, for password managers to file the new password under. */}
        <Field label="Email">
          {(id) => <input id={id} type="email" autocomplete="username" readOnly value={invitation.email} />}
        </Field>
        <Field label="Name (optional)" error={nameError}>
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              autocomplete="name"
              maxLength={200}
              value={name}
              onInput={(e) => setName(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Password" error={passwordError} hint="At least 10 characters.">
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              aria-invalid={passwordError !== undefined}
              type="password"
              autocomplete="new-password"
              minLength={10}
              maxLength={256}
              value={password}
              onInput={(e) => {
                setPassword(e.currentTarget.value)
                if (passwordError !== undefined) setError(undefined)
              }}
            />
          )}
        </Field>
        {other !== undefined && <ErrorText error={joinError(other)} />}
        <div class="actions">
          <Button type="submit" kind="primary" busy={busy}>
            Join workspace
          </Button>
        </div>
      </form>
    </section>
  )
}

/** Accepting's other refusals, in words. */
function joinError(e: unknown): string {
  if (e instanceof ApiError && e.code === "MEMBER_OF_ANOTHER_WORKSPACE")
    return (
      "This address already has a Parley account in another workspace, and an account belongs to one " +
      "workspace. Leave that workspace first, or ask to be invited with another address."
    )
  return describe(e)
}
