// Approvals: the pending queue, read again whenever GET /api/approvals/stream says one changed, so
// new proposals appear and ones decided here or by another supervisor (or expired, or cancelled)
// leave at once; a slow poll covers a stream that is down. Each shows the call's recent transcript,
// the value against the workflow's cap, and the hold time left, counting down. Deciding takes the
// supervise permission (supervisors, admins, the owner); an analyst sees the queue only.
import { useEffect, useRef, useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { ApiError, request } from "../api.js"
import { Button, duration, ErrorText, Field, money, useInterval } from "../ui.js"
import { proposedActionWords } from "../words.js"

interface Approval {
  readonly id: number
  readonly workflow_id: number
  readonly run_id: number
  readonly call_id: number | null
  readonly target_phone: string
  readonly proposed_action: "concession" | "callback" | "escalate" | string
  readonly proposed_value_minor: number | null
  readonly currency: string
  readonly rationale: string | null
  readonly context: { readonly transcript?: unknown; readonly hold_until?: unknown } | null
  readonly status: string
  readonly created_at: string
  readonly expires_at: string
}

interface Policy {
  readonly name: string
  readonly capMinor: number | undefined
  readonly capCurrency: string | undefined
}

/** Only a fallback: the stream brings changes at once, this covers a stream that is down. */
const POLL_MS = 30_000
/** A stream the browser gave up on (a refused or failed answer) is opened again after this. */
const REOPEN_MS = 5_000

export function ApprovalsPage() {
  const [pending, setPending] = useState<ReadonlyArray<Approval>>([])
  const [loaded, setLoaded] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  // Decided here: hidden at once, before the read the stream's event brings confirms it.
  const [decided, setDecided] = useState<ReadonlySet<number>>(new Set())
  const [policies, setPolicies] = useState<ReadonlyMap<number, Policy>>(new Map())
  const [, setNow] = useState(0)
  // "" shows every campaign's approvals; else one workflow's.
  const [campaign, setCampaign] = useState("")

  // Reads overlap when changes come in a burst: only the newest read's answer is shown.
  const reads = useRef(0)
  const load = () => {
    const n = ++reads.current
    request<{ approvals: Approval[] }>("GET", "/api/approvals?status=pending&limit=100").then(
      (r) => {
        if (n !== reads.current) return
        setPending(r.approvals)
        setLoaded(true)
        setError(undefined)
        loadPolicies(r.approvals)
      },
      (e: unknown) => n === reads.current && setError(e),
    )
  }
  const loadRef = useRef(load)
  loadRef.current = load
  useInterval(load, POLL_MS)

  // Each event names one approval that changed; the queue is read again rather than patched, so
  // what is shown is always the API's answer. An opened (or reopened) stream reads it too: changes
  // made while it was down were not sent.
  useEffect(() => {
    let source: EventSource | undefined
    let retry: ReturnType<typeof setTimeout> | undefined
    let gone = false
    const connect = () => {
      if (gone) return
      source = new EventSource("/api/approvals/stream")
      source.onopen = () => loadRef.current()
      source.onmessage = () => loadRef.current()
      source.onerror = () => {
        if (source?.readyState !== EventSource.CLOSED) return
        // The browser gave up (a refused answer): a 401 from /auth/me sends the page to sign-in;
        // anything else is tried again shortly, the slow poll keeping the queue current meanwhile.
        request("GET", "/auth/me").then(
          () => {
            retry = setTimeout(connect, REOPEN_MS)
          },
          () => undefined,
        )
      }
    }
    connect()
    return () => {
      gone = true
      clearTimeout(retry)
      source?.close()
    }
  }, [])
  useInterval(() => setNow(Date.now()), 1_000)

  /** Each workflow's name and concession cap, fetched once per workflow. */
  const loadPolicies = (list: ReadonlyArray<Approval>) => {
    const missing = [...new Set(list.map((a) => a.workflow_id))].filter((id) => !policies.has(id))
    for (const id of missing)
      request<{ name: string; rule_book: Record<string, unknown> }>("GET", `/api/workflows/${id}`).then(
        (w) => {
          const c = w.rule_book["concession_policy"] as { cap_minor?: unknown; currency?: unknown } | undefined
          const policy: Policy = {
            name: w.name,
            capMinor: typeof c?.cap_minor === "number" ? c.cap_minor : undefined,
            capCurrency: typeof c?.currency === "string" ? c.currency : undefined,
          }
          setPolicies((m) => new Map(m).set(id, policy))
        },
        () => undefined,
      )
  }

  const waiting = pending.filter((a) => !decided.has(a.id) && Date.parse(a.expires_at) > Date.now())
  const campaigns = [...new Set([...waiting.map((a) => a.workflow_id), ...(campaign === "" ? [] : [Number(campaign)])])]
  const shown = waiting.filter((a) => campaign === "" || String(a.workflow_id) === campaign)
  return (
    <section aria-labelledby="approvals-h">
      <h1 id="approvals-h">Approvals</h1>
      <p class="muted" aria-live="polite">
        {loaded ? `${waiting.length} waiting for a decision.` : "Loading…"}
      </p>
      {(campaigns.length > 1 || campaign !== "") && (
        <Field label="Campaign">
          {(id) => (
            <select id={id} value={campaign} onChange={(e) => setCampaign(e.currentTarget.value)}>
              <option value="">Every campaign</option>
              {campaigns.map((w) => (
                <option key={w} value={String(w)}>
                  {policies.get(w)?.name ?? `Campaign ${w}`}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <ErrorText error={error} />
      <div class="cards">
        {shown.map((a) => (
          <ApprovalCard
            key={a.id}
            approval={a}
            policy={policies.get(a.workflow_id)}
            onDecided={() => setDecided((s) => new Set(s).add(a.id))}
          />
        ))}
      </div>
    </section>
  )
}

function ApprovalCard({
  approval: a,
  policy,
  onDecided,
}: {
  readonly approval: Approval
  readonly policy: Policy | undefined
  readonly onDecided: () => void
}) {
  const [note, setNote] = useState("")
  const [busy, setBusy] = useState<"approve" | "deny" | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const { can } = useAccess()
  // The callee waits until hold_until; the proposal stays decidable until expires_at.
  const holdUntil = typeof a.context?.hold_until === "string" ? Date.parse(a.context.hold_until) : Number.NaN
  const left = Number.isNaN(holdUntil) ? undefined : Math.max(0, Math.round((holdUntil - Date.now()) / 1000))
  const transcript = Array.isArray(a.context?.transcript) ? (a.context.transcript as unknown[]).map(String) : []
  const heading = `approval-${a.id}`

  const decide = async (decision: "approve" | "deny") => {
    setBusy(decision)
    setError(undefined)
    try {
      const body = note.trim() === "" ? { decision } : { decision, note: note.trim() }
      await request("POST", `/api/approvals/${a.id}/decide`, body)
      onDecided()
    } catch (e) {
      // Someone else decided it first, or it expired: its stream event takes it off the queue.
      if (e instanceof ApiError && e.status === 409) setError("Already decided, or the hold time ran out.")
      else setError(e)
    } finally {
      setBusy(undefined)
    }
  }

  return (
    <article class="panel" aria-labelledby={heading}>
      <h2 id={heading}>
        {proposedActionWords(a.proposed_action)} for {a.target_phone}
      </h2>
      <dl class="kv">
        <dt>Campaign</dt>
        <dd>{policy?.name ?? `workflow ${a.workflow_id}`}</dd>
        {a.proposed_value_minor !== null && (
          <>
            <dt>Value</dt>
            <dd>{money(a.proposed_value_minor, a.currency)}</dd>
          </>
        )}
        {a.proposed_action === "concession" && (
          <>
            <dt>Cap</dt>
            <dd>{policy?.capMinor !== undefined ? money(policy.capMinor, policy.capCurrency ?? a.currency) : "…"}</dd>
          </>
        )}
        {a.rationale && (
          <>
            <dt>Why</dt>
            <dd>{a.rationale}</dd>
          </>
        )}
        <dt>Hold time left</dt>
        <dd>
          {left === undefined ? (
            "—"
          ) : left > 0 ? (
            <span class={left < 10 ? "error" : undefined}>{duration(left)}</span>
          ) : (
            <span class="muted">
              The callee is no longer on hold; decide until {new Date(a.expires_at).toLocaleString()}.
            </span>
          )}
        </dd>
      </dl>
      {transcript.length > 0 && (
        <>
          <h3>Recent conversation</h3>
          <ol class="transcript">
            {transcript.map((line, i) => (
              <li key={i} class={line.startsWith("agent:") ? "agent" : undefined}>
                {line}
              </li>
            ))}
          </ol>
        </>
      )}
      {!can("supervise") ? (
        <p class="hint">Supervisors, admins and the owner decide approvals.</p>
      ) : (
        <>
          <Field label="Note" error={error instanceof ApiError ? error.fieldError("note") : undefined}>
            {(id, d) => (
              <input
                id={id}
                aria-describedby={d}
                maxLength={500}
                value={note}
                onInput={(e) => setNote(e.currentTarget.value)}
              />
            )}
          </Field>
          <div class="actions">
            <Button
              kind="primary"
              busy={busy === "approve"}
              disabled={busy !== undefined}
              onClick={() => decide("approve")}
            >
              Approve
            </Button>
            <Button kind="danger" busy={busy === "deny"} disabled={busy !== undefined} onClick={() => decide("deny")}>
              Deny
            </Button>
          </div>
        </>
      )}
      <ErrorText error={error} />
    </article>
  )
}
