// Members: who is in the workspace with which role, the open invitations, and, for owners and
// admins, inviting (an emailed 7-day link), changing roles, removing and revoking; the owner also
// hands ownership to another member. Anyone but the owner may leave. All through GET /members and
// its siblings; what a role may not do is not offered (the API refuses it anyway).
import { Fragment } from "preact"
import { useState } from "preact/hooks"
import { aRole, type Role, useAccess } from "../access.js"
import { ApiError, describe, request } from "../api.js"
import { Button, ErrorText, Field, useLoad } from "../ui.js"

interface Member {
  readonly user_id: number
  readonly email: string
  readonly full_name: string | null
  readonly role: Role
  readonly email_verified: boolean
  readonly joined_at: string
}

interface Invitation {
  readonly id: number
  readonly email: string
  readonly role: Role
  readonly status: "pending" | "expired"
  readonly invited_by_user_id: number | null
  readonly created_at: string
  readonly expires_at: string
}

interface Team {
  readonly members: ReadonlyArray<Member>
  readonly invitations: ReadonlyArray<Invitation>
}

/** The roles an invitation or a role change may give (an owner is made only by a transfer). */
const GIVEN: ReadonlyArray<{ readonly role: Role; readonly means: string }> = [
  { role: "admin", means: "sets everything up: campaigns, numbers, members, keys and money settings" },
  { role: "supervisor", means: "decides approvals and may pause a campaign; reads everything" },
  { role: "analyst", means: "reads campaigns, results, calls and reports; changes nothing" },
]

const date = (iso: string) => new Date(iso).toLocaleDateString()
const when = (iso: string) => new Date(iso).toLocaleString()

/** A refusal of a member change, in words (never the code). */
function inWords(e: unknown): string {
  if (!(e instanceof ApiError)) return describe(e)
  switch (e.code) {
    case "ALREADY_MEMBER":
      return "That address is already a member of this workspace."
    case "MEMBER_OF_ANOTHER_WORKSPACE":
      return (
        "That address already has a Parley account in another workspace, and an account belongs to one " +
        "workspace. They can leave that workspace first, or be invited with another address."
      )
    case "INVITATION_LIMIT":
      return "This workspace has as many open invitations as it may (50). Revoke some, then invite again."
    case "WORKFLOW_NOT_READY":
      return (
        "Invitations go out only once the owner's email address is verified: the owner opens the link in " +
        "the verification email first."
      )
    case "OWNER_REQUIRED":
      return "The owner cannot be removed, given another role, or leave. The owner makes someone else the owner first."
    case "RATE_LIMITED":
      return "Too many invitations in the last hour (a workspace may send 30 an hour). Try again later."
    case "NOT_FOUND":
      return "That member or invitation is no longer there; the list now shows the workspace as it is."
    case "CONFLICT":
      return "That invitation was already accepted: the person is a member now."
    default:
      return describe(e)
  }
}

export function MembersPage() {
  const { me, can, refresh } = useAccess()
  const team = useLoad(() => request<Team>("GET", "/members"))
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const manage = can("admin")
  const self = me.user?.id
  const changed = (message: string) => {
    setNotice(message)
    team.reload()
  }
  const members = team.data?.members ?? []
  const invitations = team.data?.invitations ?? []

  return (
    <section aria-labelledby="members-h">
      <h1 id="members-h">Members</h1>
      <p class="muted">
        {manage
          ? "Owners and admins invite people, change their roles and remove them."
          : `You are ${aRole(me.user?.role ?? "member")} here. Owners and admins invite people and change roles.`}
      </p>
      {manage && <InviteForm onSending={() => setNotice(undefined)} onInvited={changed} />}
      {notice && (
        <p class="ok" role="status">
          {notice}
        </p>
      )}
      <ErrorText error={team.error} />
      {team.data && (
        <section class="panel" aria-labelledby="team-h">
          <h2 id="team-h">
            Team <span class="muted">({members.length})</span>
          </h2>
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">The workspace's members</caption>
              <thead>
                <tr>
                  <th scope="col">Member</th>
                  <th scope="col">Role</th>
                  <th scope="col">Joined</th>
                  {manage && <th scope="col">Actions</th>}
                </tr>
              </thead>
              <tbody>
                {members.map((m) => (
                  <MemberRow
                    key={m.user_id}
                    member={m}
                    isSelf={m.user_id === self}
                    manage={manage}
                    transfer={can("owner")}
                    onChanged={changed}
                    onTransferred={(message) => {
                      changed(message)
                      void refresh()
                    }}
                    onStale={team.reload}
                  />
                ))}
              </tbody>
            </table>
          </div>
        </section>
      )}
      {invitations.length > 0 && (
        <section class="panel" aria-labelledby="invitations-h">
          <h2 id="invitations-h">
            Invitations <span class="muted">({invitations.length})</span>
          </h2>
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Open invitations</caption>
              <thead>
                <tr>
                  <th scope="col">Email</th>
                  <th scope="col">Role</th>
                  <th scope="col">Status</th>
                  <th scope="col">Sent</th>
                  {manage && <th scope="col">Actions</th>}
                </tr>
              </thead>
              <tbody>
                {invitations.map((i) => (
                  <InvitationRow key={i.id} invitation={i} manage={manage} onChanged={changed} />
                ))}
              </tbody>
            </table>
          </div>
        </section>
      )}
      {me.user?.role === "owner" ? (
        <p class="hint">As the owner you cannot leave the workspace. To leave, first make another member the owner.</p>
      ) : (
        me.user && <Leave onLeft={refresh} />
      )}
    </section>
  )
}

function InviteForm({
  onSending,
  onInvited,
}: {
  /** A new attempt: the last one's notice no longer applies. */
  readonly onSending: () => void
  readonly onInvited: (message: string) => void
}) {
  const [email, setEmail] = useState("")
  const [role, setRole] = useState<Role>("supervisor")
  const [busy, setBusy] = useState(false)
  const [emailError, setEmailError] = useState<string | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)

  const send = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    setEmailError(undefined)
    onSending()
    const to = email.trim()
    if (!/^[^\s@]+@[^\s@]+$/.test(to)) {
      setEmailError("Enter the address to invite, such as name@example.com.")
      return
    }
    setBusy(true)
    try {
      const r = await request<{ email_sent: boolean }>("POST", "/members/invite", { email: to, role })
      setEmail("")
      onInvited(
        r.email_sent
          ? `Invitation sent to ${to} as ${aRole(role)}. The link works for 7 days.`
          : `The invitation to ${to} is made, but its email could not be sent just now. Use Resend to try again.`,
      )
    } catch (err) {
      if (err instanceof ApiError && err.fieldError("email") !== undefined)
        setEmailError("Enter the address to invite, such as name@example.com.")
      else setError(inWords(err))
    } finally {
      setBusy(false)
    }
  }

  return (
    <form class="panel" onSubmit={send} noValidate aria-labelledby="invite-h">
      <h2 id="invite-h">Invite someone</h2>
      <div class="inline-form">
        <Field label="Email" error={emailError}>
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              aria-invalid={emailError !== undefined}
              type="email"
              autocomplete="off"
              maxLength={320}
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Role">
          {(id) => (
            <select id={id} value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
              {GIVEN.map((g) => (
                <option key={g.role} value={g.role}>
                  {g.role}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Button kind="primary" type="submit" busy={busy}>
          Send invitation
        </Button>
      </div>
      <dl class="kv">
        {GIVEN.map((g) => (
          <Fragment key={g.role}>
            <dt>{g.role}</dt>
            <dd>{g.means}</dd>
          </Fragment>
        ))}
      </dl>
      <ErrorText error={error} />
    </form>
  )
}

function MemberRow({
  member: m,
  isSelf,
  manage,
  transfer,
  onChanged,
  onTransferred,
  onStale,
}: {
  readonly member: Member
  readonly isSelf: boolean
  /** The signed-in person may change roles and remove (an owner or admin). */
  readonly manage: boolean
  /** The signed-in person is the owner, who may hand ownership on. */
  readonly transfer: boolean
  readonly onChanged: (message: string) => void
  readonly onTransferred: (message: string) => void
  readonly onStale: () => void
}) {
  const [confirming, setConfirming] = useState<"remove" | "owner" | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | undefined>(undefined)
  // Nobody changes the owner's role (a transfer does) or their own here (leaving is below).
  const changeable = manage && m.role !== "owner" && !isSelf

  const act = async (fn: () => Promise<string>, then: (message: string) => void = onChanged) => {
    setBusy(true)
    setError(undefined)
    try {
      then(await fn())
    } catch (e) {
      setError(inWords(e))
      // Gone meanwhile (removed, or left): show the team as it is now.
      if (e instanceof ApiError && e.status === 404) onStale()
    } finally {
      setBusy(false)
      setConfirming(undefined)
    }
  }
  const setRole = (role: Role) =>
    act(async () => {
      await request("PATCH", `/members/${m.user_id}`, { role })
      return `${m.email} is now ${aRole(role)}.`
    })
  const remove = () =>
    act(async () => {
      await request("DELETE", `/members/${m.user_id}`)
      return `${m.email} was removed from the workspace and signed out.`
    })
  const makeOwner = () =>
    act(async () => {
      await request("PATCH", `/members/${m.user_id}`, { role: "owner" })
      return `${m.email} is now the owner; you are an admin.`
    }, onTransferred)

  return (
    <tr>
      <td>
        {m.full_name ? (
          <>
            {m.full_name}
            <br />
            <span class="muted">{m.email}</span>
          </>
        ) : (
          m.email
        )}
        {isSelf && <span class="muted"> (you)</span>}
      </td>
      <td>
        {changeable ? (
          <select
            aria-label={`Role of ${m.email}`}
            value={m.role}
            disabled={busy}
            onChange={(e) => setRole(e.currentTarget.value as Role)}
          >
            {GIVEN.map((g) => (
              <option key={g.role} value={g.role}>
                {g.role}
              </option>
            ))}
          </select>
        ) : (
          <span class={m.role === "owner" ? "badge" : undefined}>{m.role}</span>
        )}
      </td>
      <td>{date(m.joined_at)}</td>
      {manage && (
        <td>
          {confirming === "remove" ? (
            <span class="actions">
              <span>Remove {m.email}? They are signed out at once.</span>
              <Button kind="danger" busy={busy} onClick={remove}>
                Yes, remove
              </Button>
              <Button onClick={() => setConfirming(undefined)}>Cancel</Button>
            </span>
          ) : confirming === "owner" ? (
            <span class="actions">
              <span>Make {m.email} the owner? You become an admin, and only they can hand it back.</span>
              <Button kind="danger" busy={busy} onClick={makeOwner}>
                Yes, make owner
              </Button>
              <Button onClick={() => setConfirming(undefined)}>Cancel</Button>
            </span>
          ) : (
            <span class="actions">
              {transfer && m.role !== "owner" && (
                <Button onClick={() => setConfirming("owner")}>
                  Make owner<span class="visually-hidden"> {m.email}</span>
                </Button>
              )}
              {changeable && (
                <Button kind="danger" onClick={() => setConfirming("remove")}>
                  Remove<span class="visually-hidden"> {m.email}</span>
                </Button>
              )}
            </span>
          )}
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
        </td>
      )}
    </tr>
  )
}

function InvitationRow({
  invitation: i,
  manage,
  onChanged,
}: {
  readonly invitation: Invitation
  readonly manage: boolean
  readonly onChanged: (message: string) => void
}) {
  const [busy, setBusy] = useState<"resend" | "revoke" | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)
  const act = async (which: "resend" | "revoke", fn: () => Promise<string>) => {
    setBusy(which)
    setError(undefined)
    try {
      onChanged(await fn())
    } catch (e) {
      setError(inWords(e))
    } finally {
      setBusy(undefined)
    }
  }
  // Inviting the address again replaces the open invitation with a new link (a new 7 days).
  const resend = () =>
    act("resend", async () => {
      const r = await request<{ email_sent: boolean }>("POST", "/members/invite", { email: i.email, role: i.role })
      return r.email_sent
        ? `A new invitation is on its way to ${i.email}; the old link no longer works.`
        : `A new invitation to ${i.email} is made, but its email could not be sent just now.`
    })
  const revoke = () =>
    act("revoke", async () => {
      await request("POST", `/members/invitations/${i.id}/revoke`)
      return `The invitation to ${i.email} is withdrawn; its link no longer works.`
    })

  return (
    <tr>
      <td>{i.email}</td>
      <td>{i.role}</td>
      <td>
        {i.status === "pending" ? (
          `pending, until ${when(i.expires_at)}`
        ) : (
          <span class="error">expired {when(i.expires_at)}</span>
        )}
      </td>
      <td>{date(i.created_at)}</td>
      {manage && (
        <td>
          <span class="actions">
            <Button busy={busy === "resend"} disabled={busy !== undefined} onClick={resend}>
              Resend<span class="visually-hidden"> {i.email}</span>
            </Button>
            <Button kind="danger" busy={busy === "revoke"} disabled={busy !== undefined} onClick={revoke}>
              Revoke<span class="visually-hidden"> {i.email}</span>
            </Button>
          </span>
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
        </td>
      )}
    </tr>
  )
}

function Leave({ onLeft }: { readonly onLeft: () => Promise<void> }) {
  const [confirming, setConfirming] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const leave = async () => {
    setBusy(true)
    setError(undefined)
    try {
      await request("POST", "/members/leave")
      // The session ended with the membership: reading /auth/me again takes the page to sign-in.
      await onLeft()
    } catch (e) {
      setError(inWords(e))
      setBusy(false)
    }
  }
  return (
    <section class="panel" aria-labelledby="leave-h">
      <h2 id="leave-h">Leave the workspace</h2>
      <p class="muted">You stop being a member at once and can no longer sign in here.</p>
      <div class="actions">
        {confirming ? (
          <>
            <span>Leave for good? Only a new invitation brings you back.</span>
            <Button kind="danger" busy={busy} onClick={leave}>
              Yes, leave
            </Button>
            <Button onClick={() => setConfirming(false)}>Cancel</Button>
          </>
        ) : (
          <Button kind="danger" onClick={() => setConfirming(true)}>
            Leave workspace
          </Button>
        )}
      </div>
      <ErrorText error={error} />
    </section>
  )
}
