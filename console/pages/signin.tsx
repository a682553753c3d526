// Sign-in: a password, or a 6-digit code sent by email (POST /auth/otp/start, /auth/otp/verify),
// and a small sign-up form (with the workspace's name, which callees hear). Both sign-ins set the
// httpOnly svc_session cookie; the page never keeps the token the body also carries.
import { useState } from "preact/hooks"
import type { Me } from "../access.js"
import { ApiError, request } from "../api.js"
import { Button, ErrorText, Field } from "../ui.js"

type Mode = "password" | "code" | "signup"

const fieldError = (e: unknown, field: string): string | undefined =>
  e instanceof ApiError ? e.fieldError(field) : undefined

export function SignInPage({ onSignedIn }: { readonly onSignedIn: (me: Me) => void }) {
  const [mode, setMode] = useState<Mode>("password")
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [code, setCode] = useState("")
  const [workspace, setWorkspace] = useState("")
  const [codeSent, setCodeSent] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [notice, setNotice] = useState<string | undefined>(undefined)

  const run = async (fn: () => Promise<void>) => {
    setBusy(true)
    setError(undefined)
    setNotice(undefined)
    try {
      await fn()
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  // The session is the cookie the answer set; /auth/me confirms the browser kept it.
  const finish = async () => onSignedIn(await request<Me>("GET", "/auth/me"))

  const signIn = (e: Event) => {
    e.preventDefault()
    run(async () => {
      await request("POST", "/auth/login", { email, password })
      await finish()
    })
  }
  const sendCode = (e: Event) => {
    e.preventDefault()
    run(async () => {
      await request("POST", codeSent ? "/auth/otp/resend" : "/auth/otp/start", { email })
      setCodeSent(true)
      setNotice(`If ${email} has an account, a 6-digit code is on its way.`)
    })
  }
  const verifyCode = (e: Event) => {
    e.preventDefault()
    run(async () => {
      await request("POST", "/auth/otp/verify", { email, code })
      await finish()
    })
  }
  const signUp = (e: Event) => {
    e.preventDefault()
    run(async () => {
      const name = workspace.trim()
      await request("POST", "/auth/signup", { email, password, ...(name !== "" && { workspace_name: name }) })
      setMode("password")
      setNotice("Account created. Open the link in the verification email, then sign in.")
    })
  }
  const switchTo = (m: Mode) => {
    setMode(m)
    setError(undefined)
    setNotice(undefined)
  }

  const emailField = (
    <Field label="Email" error={fieldError(error, "email")}>
      {(id, d) => (
        <input
          id={id}
          aria-describedby={d}
          type="email"
          autocomplete="username"
          required
          maxLength={320}
          value={email}
          onInput={(e) => setEmail(e.currentTarget.value)}
        />
      )}
    </Field>
  )

  return (
    <section aria-labelledby="signin-h">
      <h1 id="signin-h">{mode === "signup" ? "Create an account" : "Sign in"}</h1>
      {notice && (
        <p class="ok" role="status">
          {notice}
        </p>
      )}
      {mode === "password" && (
        <form onSubmit={signIn} noValidate>
          {emailField}
          <Field label="Password" error={fieldError(error, "password")}>
            {(id, d) => (
              <input
                id={id}
                aria-describedby={d}
                type="password"
                autocomplete="current-password"
                required
                maxLength={1024}
                value={password}
                onInput={(e) => setPassword(e.currentTarget.value)}
              />
            )}
          </Field>
          <ErrorText error={error} besideFields={["email", "password"]} />
          <div class="actions">
            <Button type="submit" kind="primary" busy={busy}>
              Sign in
            </Button>
          </div>
        </form>
      )}
      {mode === "code" && (
        <>
          <form onSubmit={sendCode} noValidate>
            {emailField}
            <div class="actions">
              <Button type="submit" busy={busy && !codeSent}>
                {codeSent ? "Send again" : "Send code"}
              </Button>
            </div>
          </form>
          {codeSent && (
            <form onSubmit={verifyCode} noValidate>
              <Field label="Code" error={fieldError(error, "code")} hint="The 6 digits from the email.">
                {(id, d) => (
                  <input
                    id={id}
                    aria-describedby={d}
                    inputMode="numeric"
                    autocomplete="one-time-code"
                    pattern="[0-9]{6}"
                    maxLength={6}
                    value={code}
                    onInput={(e) => setCode(e.currentTarget.value)}
                  />
                )}
              </Field>
              <div class="actions">
                <Button type="submit" kind="primary" busy={busy}>
                  Verify code
                </Button>
              </div>
            </form>
          )}
          <ErrorText error={error} besideFields={["email", "code"]} />
        </>
      )}
      {mode === "signup" && (
        <form onSubmit={signUp} noValidate>
          {emailField}
          <Field label="Password" error={fieldError(error, "password")} hint="At least 10 characters.">
            {(id, d) => (
              <input
                id={id}
                aria-describedby={d}
                type="password"
                autocomplete="new-password"
                minLength={10}
                maxLength={256}
                value={password}
                onInput={(e) => setPassword(e.currentTarget.value)}
              />
            )}
          </Field>
          <Field
            label="Company or workspace name (optional)"
            error={fieldError(error, "workspace_name")}
            hint="Callees hear it: “… calling from <name>”. Left empty, it is taken from your email's domain. You can change it later in Settings."
          >
            {(id, d) => (
              <input
                id={id}
                aria-describedby={d}
                autocomplete="organization"
                maxLength={80}
                value={workspace}
                onInput={(e) => setWorkspace(e.currentTarget.value)}
              />
            )}
          </Field>
          <ErrorText error={error} besideFields={["email", "password", "workspace_name"]} />
          <div class="actions">
            <Button type="submit" kind="primary" busy={busy}>
              Create account
            </Button>
          </div>
        </form>
      )}
      <p class="actions">
        {mode !== "password" && <Button onClick={() => switchTo("password")}>Use a password</Button>}
        {mode !== "code" && <Button onClick={() => switchTo("code")}>Email me a code</Button>}
        {mode !== "signup" && <Button onClick={() => switchTo("signup")}>Create an account</Button>}
      </p>
    </section>
  )
}
