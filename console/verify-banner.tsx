// The banner on every page while the signed-in person's address is unverified (GET /auth/me's
// user.email_verified): what it blocks, and "Send the link again" (POST /auth/verify-email/resend).
import { useEffect, useState } from "preact/hooks"
import { useAccess } from "./access.js"
import { request } from "./api.js"
import { Button, ErrorText } from "./ui.js"

export function VerifyBanner() {
  const { me, refresh } = useAccess()
  const [busy, setBusy] = useState(false)
  const [sent, setSent] = useState<string | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const unverified = me.user !== null && me.user.email_verified === false
  // The link is opened in another tab: coming back here reads /auth/me again, and the banner goes.
  useEffect(() => {
    if (!unverified) return
    const on = () => void refresh()
    addEventListener("focus", on)
    return () => removeEventListener("focus", on)
  }, [unverified])
  if (!unverified) return null

  const resend = async () => {
    setBusy(true)
    setError(undefined)
    setSent(undefined)
    try {
      const r = await request<{ sent: boolean; already_verified: boolean }>("POST", "/auth/verify-email/resend")
      if (r.already_verified) await refresh()
      else
        setSent(
          r.sent
            ? `A new link is on its way to ${me.user?.email}. Check the spam folder too.`
            : "The email could not be sent just now. Try again in a moment.",
        )
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <section class="banner" aria-label="Verify your email">
      <p>
        <strong>Verify your email address.</strong> Until you open the link we emailed to {me.user?.email}, campaigns
        cannot run and nothing can be spent.
      </p>
      <Button busy={busy} onClick={resend}>
        Send the link again
      </Button>
      {sent && (
        <p class="ok" role="status">
          {sent}
        </p>
      )}
      <ErrorText error={error} />
    </section>
  )
}
