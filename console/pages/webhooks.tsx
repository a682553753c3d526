// Webhooks: the workspace's endpoints (GET /api/webhooks/endpoints) and, for owners and admins,
// adding one (an https URL and the events it receives, chosen from the OpenAPI document's catalogue),
// a test ping, a new signing secret (shown once), turning it off or on, and deleting it; each
// endpoint's delivery attempts, newest first, with Retry for one that has not been delivered.
import "./account.css"
import { useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { ApiError, request } from "../api.js"
import { Button, ErrorText, Field, Table, useLoad } from "../ui.js"
import { deliveryWords, EVENT_WORDS, eventWords } from "../words.js"

interface Endpoint {
  readonly id: number
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly description: string | null
  readonly enabled: boolean
  readonly disabled_reason: string | null
  readonly created_at: string
  readonly secret_rotating_until?: string | null
}

interface Delivery {
  readonly id: number
  readonly delivery_id: number
  readonly event_id: string
  readonly event_type: string
  readonly attempt: number
  readonly started_at: string
  readonly status_code: number | null
  readonly latency_ms: number | null
  readonly error: string | null
  readonly outcome: "delivered" | "retry" | "failed"
  readonly next_attempt_at: string | null
  readonly delivery_status: "pending" | "delivered" | "failed"
}

const when = (iso: string) => new Date(iso).toLocaleString()

/** The event types an endpoint may subscribe to: the OpenAPI document's `webhooks`, less the test ping. */
async function eventCatalogue(): Promise<ReadonlyArray<string>> {
  try {
    const doc = await request<{ webhooks?: Record<string, unknown> }>("GET", "/openapi.json")
    const types = Object.keys(doc.webhooks ?? {}).filter((t) => t !== "ping")
    if (types.length > 0) return types
  } catch {
    // The words' own list is the same catalogue, kept for a document that could not be read.
  }
  return Object.keys(EVENT_WORDS).filter((t) => t !== "ping")
}

export function WebhooksPage() {
  const { can } = useAccess()
  const admin = can("admin")
  const list = useLoad(() => request<{ endpoints: Endpoint[] }>("GET", "/api/webhooks/endpoints"))
  const [secret, setSecret] = useState<{ url: string; secret: string } | undefined>(undefined)
  const endpoints = list.data?.endpoints ?? []

  return (
    <section aria-labelledby="webhooks-h">
      <h1 id="webhooks-h">Webhooks</h1>
      <p class="muted">
        Parley POSTs signed events to these addresses as they happen (a call ended, an approval was asked for…).
        {admin ? "" : " Owners and admins add and change them; you can see them and their deliveries here."}
      </p>
      {admin && (
        <CreateEndpoint
          onCreated={(e) => {
            setSecret(e)
            list.reload()
          }}
        />
      )}
      {secret && (
        <section class="secret" aria-label="Signing secret">
          <p>
            The signing secret of {secret.url}. Copy it now: it is shown only this once. Your receiver checks each
            event's X-SVC-Signature with it.
          </p>
          <code data-testid="webhook-secret">{secret.secret}</code>{" "}
          <Button onClick={() => void navigator.clipboard?.writeText(secret.secret)}>Copy</Button>{" "}
          <Button onClick={() => setSecret(undefined)}>Done</Button>
        </section>
      )}
      <ErrorText error={list.error} />
      {list.data && endpoints.length === 0 && <p class="muted">No endpoints yet.</p>}
      {endpoints.map((e) => (
        <EndpointCard key={e.id} endpoint={e} admin={admin} onChanged={list.reload} onSecret={setSecret} />
      ))}
    </section>
  )
}

function CreateEndpoint({ onCreated }: { readonly onCreated: (e: { url: string; secret: string }) => void }) {
  const catalogue = useLoad(eventCatalogue)
  const [url, setUrl] = useState("")
  const [description, setDescription] = useState("")
  const [all, setAll] = useState(true)
  const [chosen, setChosen] = useState<ReadonlyArray<string>>([])
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [local, setLocal] = useState<Record<string, string>>({})

  const submit = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    const problems: Record<string, string> = {}
    if (url.trim() === "") problems["url"] = "Enter the address to send events to, such as https://example.com/hooks."
    if (!all && chosen.length === 0) problems["events"] = "Choose at least one event, or all of them."
    setLocal(problems)
    if (Object.keys(problems).length > 0) return
    setBusy(true)
    try {
      const body = {
        url: url.trim(),
        events: all ? ["*"] : chosen,
        ...(description.trim() !== "" && { description: description.trim() }),
      }
      const created = await request<Endpoint & { secret: string }>("POST", "/api/webhooks/endpoints", body)
      setUrl("")
      setDescription("")
      setChosen([])
      setAll(true)
      onCreated({ url: created.url, secret: created.secret })
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const fieldError = (f: string) => local[f] ?? (error instanceof ApiError ? error.fieldError(f) : undefined)
  const toggle = (t: string) => setChosen((c) => (c.includes(t) ? c.filter((x) => x !== t) : [...c, t]))

  return (
    <form class="panel" onSubmit={submit} noValidate aria-labelledby="new-endpoint-h">
      <h2 id="new-endpoint-h">Add an endpoint</h2>
      <Field label="Endpoint URL" error={fieldError("url")} hint="An https address your server answers on.">
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            type="url"
            inputMode="url"
            maxLength={2048}
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        )}
      </Field>
      <Field label="Description (optional)" error={fieldError("description")}>
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            maxLength={200}
            value={description}
            onInput={(e) => setDescription(e.currentTarget.value)}
          />
        )}
      </Field>
      <fieldset>
        <legend>Events</legend>
        <label class="check">
          <input type="checkbox" checked={all} onChange={() => setAll(!all)} /> All events, including ones added later
        </label>
        {!all && (
          <ul class="plain">
            {(catalogue.data ?? []).map((t) => (
              <li key={t}>
                <label class="check">
                  <input type="checkbox" checked={chosen.includes(t)} onChange={() => toggle(t)} /> {eventWords(t)}{" "}
                  <code class="muted">{t}</code>
                </label>
              </li>
            ))}
          </ul>
        )}
        {fieldError("events") && <p class="error">{fieldError("events")}</p>}
      </fieldset>
      <ErrorText error={error} besideFields={["url", "description", "events"]} />
      <div class="actions">
        <Button type="submit" kind="primary" busy={busy}>
          Add endpoint
        </Button>
      </div>
    </form>
  )
}

function EndpointCard({
  endpoint: e,
  admin,
  onChanged,
  onSecret,
}: {
  readonly endpoint: Endpoint
  readonly admin: boolean
  readonly onChanged: () => void
  readonly onSecret: (s: { url: string; secret: string }) => void
}) {
  const [busy, setBusy] = useState<string | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const [confirmDelete, setConfirmDelete] = useState(false)
  const [showDeliveries, setShowDeliveries] = useState(false)
  const [deliveriesTick, setDeliveriesTick] = useState(0)
  const heading = `endpoint-${e.id}-h`

  const act = async (name: string, method: string, path: string, body?: unknown) => {
    setBusy(name)
    setError(undefined)
    setNotice(undefined)
    try {
      return await request<Record<string, unknown>>(method, path, body)
    } catch (err) {
      setError(err)
      return undefined
    } finally {
      setBusy(undefined)
    }
  }
  const ping = async () => {
    if ((await act("ping", "POST", `/api/webhooks/endpoints/${e.id}/test`)) === undefined) return
    setNotice("Test ping sent: it shows in the deliveries below within a few seconds.")
    setShowDeliveries(true)
    setDeliveriesTick((t) => t + 1)
  }
  const rotate = async () => {
    const r = await act("rotate", "POST", `/api/webhooks/endpoints/${e.id}/rotate-secret`)
    if (r === undefined) return
    onSecret({ url: e.url, secret: String(r["secret"]) })
    setNotice("New signing secret made; the old one keeps signing beside it for a while, so you can switch over.")
    onChanged()
  }
  const setEnabled = async (enabled: boolean) => {
    if ((await act("enable", "PATCH", `/api/webhooks/endpoints/${e.id}`, { enabled })) !== undefined) onChanged()
  }
  const remove = async () => {
    if ((await act("delete", "DELETE", `/api/webhooks/endpoints/${e.id}`)) !== undefined) onChanged()
  }

  return (
    <article class="panel" aria-labelledby={heading}>
      <h2 id={heading} class="prewrap">
        {e.url}
      </h2>
      <dl class="kv">
        {e.description && (
          <>
            <dt>Description</dt>
            <dd>{e.description}</dd>
          </>
        )}
        <dt>Events</dt>
        <dd>{e.events.includes("*") ? "All events" : e.events.map((t) => eventWords(t)).join(", ")}</dd>
        <dt>State</dt>
        <dd>
          {e.enabled
            ? "On"
            : e.disabled_reason === "failing"
              ? "Turned off by Parley: deliveries kept failing. Fix the receiver, then turn it on."
              : "Off"}
        </dd>
        <dt>Added</dt>
        <dd>{when(e.created_at)}</dd>
      </dl>
      <div class="actions">
        {admin && (
          <>
            <Button busy={busy === "ping"} disabled={!e.enabled} onClick={ping}>
              Send test ping
            </Button>
            <Button busy={busy === "rotate"} onClick={rotate}>
              New signing secret
            </Button>
            <Button busy={busy === "enable"} onClick={() => setEnabled(!e.enabled)}>
              {e.enabled ? "Turn off" : "Turn on"}
            </Button>
            {confirmDelete ? (
              <>
                <span>Nothing more is sent to it.</span>
                <Button kind="danger" busy={busy === "delete"} onClick={remove}>
                  Yes, delete
                </Button>
                <Button onClick={() => setConfirmDelete(false)}>Keep it</Button>
              </>
            ) : (
              <Button kind="danger" onClick={() => setConfirmDelete(true)}>
                Delete
              </Button>
            )}
          </>
        )}
        <Button aria-expanded={showDeliveries} onClick={() => setShowDeliveries(!showDeliveries)}>
          {showDeliveries ? "Hide deliveries" : "Show deliveries"}
        </Button>
      </div>
      {notice && (
        <p class="ok" role="status">
          {notice}
        </p>
      )}
      <ErrorText error={error} />
      {showDeliveries && <Deliveries key={deliveriesTick} endpointId={e.id} admin={admin} />}
    </article>
  )
}

function Deliveries({ endpointId, admin }: { readonly endpointId: number; readonly admin: boolean }) {
  const page = useLoad(() =>
    request<{ deliveries: Delivery[]; next_cursor: string | null }>(
      "GET",
      `/api/webhooks/endpoints/${endpointId}/deliveries?limit=50`,
    ),
  )
  const [error, setError] = useState<unknown>(undefined)
  const [retried, setRetried] = useState<ReadonlySet<number>>(new Set())
  const retry = async (d: Delivery) => {
    setError(undefined)
    try {
      await request("POST", `/api/webhooks/deliveries/${d.delivery_id}/retry`)
      setRetried((s) => new Set(s).add(d.delivery_id))
      page.reload()
    } catch (err) {
      setError(err)
    }
  }
  const rows = page.data?.deliveries ?? []
  // One Retry per delivery, on its newest attempt (the list is newest first), while not delivered.
  const newest = new Map<number, number>()
  for (const d of rows) if (!newest.has(d.delivery_id)) newest.set(d.delivery_id, d.id)
  return (
    <section aria-label={`Deliveries to endpoint ${endpointId}`}>
      <h3>Deliveries</h3>
      <ErrorText error={error ?? page.error} />
      {page.data && (
        <Table<Delivery>
          caption="Delivery attempts, newest first"
          rows={rows}
          rowKey={(d) => d.id}
          empty="Nothing sent yet."
          columns={[
            { title: "When", cell: (d) => when(d.started_at) },
            { title: "Event", cell: (d) => eventWords(d.event_type) },
            { title: "Attempt", cell: (d) => d.attempt },
            {
              title: "Result",
              cell: (d) =>
                `${deliveryWords(d.outcome)}${d.status_code === null ? "" : ` (HTTP ${d.status_code})`}${
                  d.error && d.error !== `HTTP ${d.status_code}` ? `: ${d.error}` : ""
                }`,
            },
            { title: "Time taken", cell: (d) => (d.latency_ms === null ? "—" : `${d.latency_ms} ms`) },
            {
              title: "Next try",
              cell: (d) => (d.next_attempt_at === null ? "—" : when(d.next_attempt_at)),
            },
            ...(admin
              ? [
                  {
                    title: "Retry",
                    cell: (d: Delivery) =>
                      newest.get(d.delivery_id) === d.id &&
                      d.delivery_status !== "delivered" &&
                      !retried.has(d.delivery_id) ? (
                        <Button onClick={() => retry(d)}>
                          Retry<span class="visually-hidden"> delivery {d.delivery_id}</span>
                        </Button>
                      ) : null,
                  },
                ]
              : []),
          ]}
        />
      )}
      <Button onClick={page.reload}>Refresh deliveries</Button>
    </section>
  )
}
