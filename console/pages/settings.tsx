// The Settings page: the workspace's name (what callees hear; owners and admins rename it), API keys
// (a new key's secret is shown once, here, and never again), the do-not-call list (add, remove,
// import a CSV) and onboarding: the mode, the checklist and each provider credential as the API
// shows it, masked, or the built-in simulator where that is what answers. Every role mints API keys, up to its ceiling
// (owners and admins any scope, others read) and manages the ones it made; owners and admins manage
// all of them and change the do-not-call list.
import "./account.css"
import { useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { ApiError, request, upload } from "../api.js"
import { Button, ErrorText, Field, Table, useLoad } from "../ui.js"
import { credentialStatusWords, dncSourceWords, keyStatusWords, providerKindWords } from "../words.js"

interface Key {
  readonly id: number
  readonly name: string
  readonly prefix: string
  readonly scope: "read" | "write" | "admin"
  readonly status: string
  readonly created_at: string
  readonly created_by_user_id: number | null
  readonly expires_at: string | null
  readonly last_used_at: string | null
}

interface DncEntry {
  readonly id: number
  readonly phone_e164: string
  readonly reason: string | null
  readonly source: string
  readonly added_at: string
}

interface Onboarding {
  readonly mode: "bundled" | "byok"
  readonly completed: boolean
  readonly ready: boolean
  readonly checklist: ReadonlyArray<{ readonly item: string; readonly done: boolean; readonly detail: string }>
  readonly providers: ReadonlyArray<{
    readonly provider: string
    readonly kind: string
    readonly status: string
    readonly hint: string | null
    readonly primary_id: string | null
    readonly dormant: boolean
    readonly error?: string
  }>
}

const date = (iso: string | null) => (iso === null ? "never" : new Date(iso).toLocaleString())

export function SettingsPage() {
  return (
    <section aria-labelledby="settings-h">
      <h1 id="settings-h">Settings</h1>
      <Workspace />
      <ApiKeys />
      <DncList />
      <OnboardingStatus />
    </section>
  )
}

/** The scopes a role may give a key: no more than its own (owners and admins any, others read). */
const SCOPES: ReadonlyArray<Key["scope"]> = ["read", "write", "admin"]

function ApiKeys() {
  const { me, can } = useAccess()
  const scopes = can("admin") ? SCOPES : SCOPES.slice(0, 1)
  // Owners and admins manage any key; others the read keys they made themselves.
  const manages = (k: Key) => can("admin") || (k.created_by_user_id === me.user?.id && scopes.includes(k.scope))
  const keys = useLoad(() => request<{ keys: Key[] }>("GET", "/api-keys"))
  const [name, setName] = useState("")
  const [scope, setScope] = useState<Key["scope"]>("read")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [nameError, setNameError] = useState<string | undefined>(undefined)
  const [created, setCreated] = useState<{ name: string; secret: string } | undefined>(undefined)

  const create = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    setNameError(undefined)
    if (name.trim() === "") {
      setNameError("Give the key a name, such as the system that will use it.")
      return
    }
    setBusy(true)
    try {
      const key = await request<Key & { secret: string }>("POST", "/api-keys", { name: name.trim(), scope })
      setCreated({ name: key.name, secret: key.secret })
      setName("")
      keys.reload()
    } catch (err) {
      if (err instanceof ApiError && err.field === "name") setNameError(err.message)
      else setError(err)
    } finally {
      setBusy(false)
    }
  }

  const revoke = async (k: Key) => {
    if (!confirm(`Revoke the key “${k.name}”? Anything using it stops working at once.`)) return
    setError(undefined)
    try {
      await request("POST", `/api-keys/${k.id}/revoke`)
      keys.reload()
    } catch (err) {
      setError(err)
    }
  }

  return (
    <section aria-labelledby="keys-h" class="panel">
      <h2 id="keys-h">API keys</h2>
      <form onSubmit={create} class="inline-form">
        <Field label="Key name" error={nameError}>
          {(id, describedBy) => (
            <input
              id={id}
              value={name}
              maxLength={120}
              aria-describedby={describedBy}
              aria-invalid={nameError !== undefined}
              onInput={(e) => setName(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Scope" {...(scopes.length === 1 && { hint: "Your role makes read keys." })}>
          {(id, describedBy) => (
            <select
              id={id}
              aria-describedby={describedBy}
              value={scope}
              onChange={(e) => setScope(e.currentTarget.value as Key["scope"])}
            >
              {scopes.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Button kind="primary" type="submit" busy={busy}>
          Create key
        </Button>
      </form>
      {created && (
        <section class="secret" aria-label="New key secret">
          <p>The secret of “{created.name}”. Copy it now: it is shown only this once.</p>
          <code data-testid="key-secret">{created.secret}</code>{" "}
          <Button onClick={() => void navigator.clipboard?.writeText(created.secret)}>Copy</Button>{" "}
          <Button onClick={() => setCreated(undefined)}>Done</Button>
        </section>
      )}
      <ErrorText error={error ?? keys.error} />
      {keys.data && (
        <Table
          caption="The workspace's API keys"
          rows={keys.data.keys}
          rowKey={(k) => k.id}
          empty="No keys yet."
          columns={[
            { title: "Name", cell: (k) => k.name },
            { title: "Key", cell: (k) => <code>{k.prefix}…</code> },
            { title: "Scope", cell: (k) => k.scope },
            { title: "Status", cell: (k) => keyStatusWords(k.status) },
            { title: "Last used", cell: (k) => date(k.last_used_at) },
            {
              title: "Actions",
              cell: (k) =>
                k.status === "active" && manages(k) ? (
                  <Button kind="danger" onClick={() => revoke(k)} aria-label={`Revoke ${k.name}`}>
                    Revoke
                  </Button>
                ) : null,
            },
          ]}
        />
      )}
    </section>
  )
}

function DncList() {
  const { can } = useAccess()
  const edit = can("write")
  const list = useLoad(() => request<{ entries: DncEntry[]; total: number }>("GET", "/dnc?limit=100"))
  const [phone, setPhone] = useState("")
  const [reason, setReason] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [fields, setFields] = useState<Record<string, string>>({})
  const [file, setFile] = useState<File | undefined>(undefined)
  const [progress, setProgress] = useState<number | undefined>(undefined)
  const [imported, setImported] = useState<string | undefined>(undefined)

  const add = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    setFields({})
    if (phone.trim() === "") {
      setFields({ phone_e164: "Enter a phone number, such as +14155550100." })
      return
    }
    setBusy(true)
    try {
      await request("POST", "/dnc/add", { phone_e164: phone.trim(), reason: reason.trim() || null })
      setPhone("")
      setReason("")
      list.reload()
    } catch (err) {
      if (err instanceof ApiError && err.field !== undefined) setFields({ [err.field]: err.message })
      else setError(err)
    } finally {
      setBusy(false)
    }
  }

  const remove = async (entry: DncEntry) => {
    setError(undefined)
    try {
      await request("DELETE", `/dnc/${encodeURIComponent(entry.phone_e164)}`)
      list.reload()
    } catch (err) {
      setError(err)
    }
  }

  const importFile = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    setImported(undefined)
    if (file === undefined) {
      setFields({ file: "Choose a CSV file with a phone column (and optionally reason)." })
      return
    }
    setFields({})
    const form = new FormData()
    form.append("file", file, file.name)
    setProgress(0)
    try {
      const r = await upload<{ added: number; skipped_existing: number; skipped_invalid: number }>(
        "/dnc/import",
        form,
        setProgress,
      )
      setImported(
        `Imported: ${r.added} added, ${r.skipped_existing} already listed, ${r.skipped_invalid} not valid numbers.`,
      )
      list.reload()
    } catch (err) {
      setError(err)
    } finally {
      setProgress(undefined)
    }
  }

  return (
    <section aria-labelledby="dnc-h" class="panel">
      <h2 id="dnc-h">Do-not-call list</h2>
      <p class="muted">Numbers here are never dialed by any campaign of this workspace.</p>
      {edit && (
        <>
          <form onSubmit={add} class="inline-form">
            <Field label="Phone number" error={fields["phone_e164"]}>
              {(id, describedBy) => (
                <input
                  id={id}
                  type="tel"
                  value={phone}
                  maxLength={64}
                  aria-describedby={describedBy}
                  aria-invalid={fields["phone_e164"] !== undefined}
                  onInput={(e) => setPhone(e.currentTarget.value)}
                />
              )}
            </Field>
            <Field label="Reason" error={fields["reason"]}>
              {(id, describedBy) => (
                <input
                  id={id}
                  value={reason}
                  maxLength={200}
                  aria-describedby={describedBy}
                  onInput={(e) => setReason(e.currentTarget.value)}
                />
              )}
            </Field>
            <Button kind="primary" type="submit" busy={busy}>
              Add number
            </Button>
          </form>
          <form onSubmit={importFile} class="inline-form">
            <Field
              label="DNC CSV"
              error={fields["file"]}
              hint="A header row naming a phone column; reason is optional."
            >
              {(id, describedBy) => (
                <input
                  id={id}
                  type="file"
                  accept=".csv,text/csv"
                  aria-describedby={describedBy}
                  onChange={(e) => setFile(e.currentTarget.files?.[0])}
                />
              )}
            </Field>
            <Button type="submit" busy={progress !== undefined}>
              Import CSV
            </Button>
            {progress !== undefined && (
              <progress max={1} value={progress} aria-label="Import progress">
                {Math.round(progress * 100)}%
              </progress>
            )}
          </form>
          {imported && (
            <p class="ok" role="status">
              {imported}
            </p>
          )}
        </>
      )}
      <ErrorText error={error ?? list.error} />
      {list.data && (
        <>
          <p class="muted">
            {list.data.total} number{list.data.total === 1 ? "" : "s"} listed
            {list.data.total > list.data.entries.length && ` (the newest ${list.data.entries.length} shown)`}.
          </p>
          <Table
            caption="Do-not-call numbers, newest first"
            rows={list.data.entries}
            rowKey={(d) => d.id}
            empty="The list is empty."
            columns={[
              { title: "Number", cell: (d) => d.phone_e164 },
              { title: "Reason", cell: (d) => d.reason ?? "" },
              { title: "Source", cell: (d) => dncSourceWords(d.source) },
              { title: "Added", cell: (d) => date(d.added_at) },
              ...(edit
                ? [
                    {
                      title: "Actions",
                      cell: (d: DncEntry) => (
                        <Button onClick={() => remove(d)} aria-label={`Remove ${d.phone_e164}`}>
                          Remove
                        </Button>
                      ),
                    },
                  ]
                : []),
            ]}
          />
        </>
      )}
    </section>
  )
}

/** What /healthz says backs each kind in this deployment: a built-in simulator, or a live service. */
interface Health {
  readonly providers?: Readonly<Record<string, { readonly mode: "simulator" | "live" }>>
}

/** The deployment's kind (GET /healthz) behind each onboarding provider. */
const HEALTH_KIND: Readonly<Record<string, string>> = {
  llm: "llm",
  telco_a: "telephony",
  telco_b: "telephony",
  tts: "speech",
  stt: "speech",
}

/** A provider credential's state as a person reads it: the simulator when nothing else is set up. */
function providerStatus(p: Onboarding["providers"][number], mode: Onboarding["mode"], health: Health | undefined) {
  const kind = health?.providers?.[HEALTH_KIND[p.provider] ?? ""]
  if (p.status === "not_configured" || (p.dormant && mode === "bundled")) {
    if (mode === "bundled") return kind?.mode === "live" ? "Parley's own (bundled)" : "Simulator (built in)"
    return "Not set up"
  }
  return `${credentialStatusWords(p.status)}${p.dormant ? " (unused in bundled mode)" : ""}`
}

function OnboardingStatus() {
  const status = useLoad(() => request<Onboarding>("GET", "/onboarding/status"))
  // Public and same-origin: which providers this deployment runs on its simulators.
  const health = useLoad(() => request<Health>("GET", "/healthz").catch(() => ({}) as Health))
  const s = status.data
  return (
    <section aria-labelledby="onboarding-h" class="panel">
      <h2 id="onboarding-h">Onboarding</h2>
      <ErrorText error={status.error} />
      {s && (
        <>
          <p>
            Mode: <strong>{s.mode === "bundled" ? "Parley's providers (bundled)" : "your own providers"}</strong>
            {" · "}
            {s.completed ? "complete" : s.ready ? "ready to complete" : "not complete yet"}
          </p>
          <ul class="checklist">
            {s.checklist.map((c) => (
              <li key={c.item} class={c.done ? "done" : "todo"}>
                <span aria-hidden="true">{c.done ? "✓" : "○"}</span> {c.detail}
                <span class="visually-hidden">{c.done ? " (done)" : " (to do)"}</span>
              </li>
            ))}
          </ul>
          <Table
            caption="Provider credentials (secrets masked)"
            rows={s.providers}
            rowKey={(p) => p.provider}
            columns={[
              { title: "Provider", cell: (p) => providerKindWords(p.kind) },
              { title: "Status", cell: (p) => providerStatus(p, s.mode, health.data) },
              { title: "Account", cell: (p) => p.primary_id ?? "" },
              { title: "Secret", cell: (p) => (p.hint === null ? "" : <code>{p.hint}</code>) },
              { title: "Problem", cell: (p) => p.error ?? "" },
            ]}
          />
        </>
      )}
    </section>
  )
}

interface WorkspaceRecord {
  readonly id: number
  readonly name: string
  readonly country: string
  readonly currency: string
}

/** The workspace's name: owners and admins rename it; everyone else reads it. */
function Workspace() {
  const { can, refresh } = useAccess()
  const ws = useLoad(() => request<WorkspaceRecord>("GET", "/api/workspace"))
  const [name, setName] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [saved, setSaved] = useState(false)
  const shown = name ?? ws.data?.name ?? ""

  const save = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    setSaved(false)
    setBusy(true)
    try {
      const updated = await request<WorkspaceRecord>("PATCH", "/api/workspace", { name: shown.trim() })
      setName(updated.name)
      setSaved(true)
      ws.reload()
      await refresh()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const fieldError = error instanceof ApiError ? error.fieldError("name") : undefined
  return (
    <section aria-labelledby="workspace-h" class="panel">
      <h2 id="workspace-h">Workspace</h2>
      <ErrorText error={ws.error} />
      {ws.data &&
        (can("admin") ? (
          <form onSubmit={save} class="inline-form">
            <Field
              label="Workspace name"
              error={fieldError}
              hint="Callees hear it in every call: “… calling from <name>”, from the next call on."
            >
              {(id, d) => (
                <input
                  id={id}
                  aria-describedby={d}
                  maxLength={80}
                  value={shown}
                  onInput={(e) => {
                    setName(e.currentTarget.value)
                    setSaved(false)
                  }}
                />
              )}
            </Field>
            <Button kind="primary" type="submit" busy={busy}>
              Save name
            </Button>
          </form>
        ) : (
          <p>
            Callees hear “… calling from <strong data-testid="workspace-name">{ws.data.name}</strong>”. Owners and
            admins can change the name.
          </p>
        ))}
      {saved && (
        <p class="ok" role="status">
          Saved: callees now hear “… calling from {ws.data?.name ?? shown}”.
        </p>
      )}
      <ErrorText error={error} besideFields={["name"]} />
    </section>
  )
}
