// Approvals: the queue by time left (GET /api/approvals?order=time_left), read again whenever the
// approvals feed says one changed, so new proposals appear and decided ones leave at once; a slow poll
// covers a feed that is down. "On hold now": the callee waits on the line, with the time left counting
// down; "After the call": the call has ended, and each card says what a decision will do now. Buttons
// come first on each card (a narrow screen shows the first Approve without scrolling); a concession's
// amount can be changed within the rule book's cap; a decision shows what it did (the answer's effect).
// The Decided tab lists who decided what, when, and what it did. Deciding takes the supervise
// permission (supervisors, admins, the owner); an analyst sees the queue only.
import { useEffect, useRef, useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { request } from "../api.js"
import { useApprovalChanges } from "../approvals-feed.js"
import { duration, ErrorText, Field, money, Table, Tabs, useInterval } from "../ui.js"
import { approvalStatusWords, decidedByWords, decidedPhaseWords, phaseWords, proposedActionWords } from "../words.js"
import {
  type Approval,
  calleeOf,
  DecideControls,
  holdLeft,
  holdUntil,
  isHeld,
  type Notice,
  Notices,
  noticeOf,
  type Policy,
  usePolicies,
} from "./decide.js"

/** Only a fallback: the feed brings changes at once, this covers a feed that is down. */
const POLL_MS = 30_000
/** Decided approvals listed (newest first). */
const DECIDED_LIMIT = 100

export function ApprovalsPage() {
  const [pending, setPending] = useState<ReadonlyArray<Approval>>([])
  const [loaded, setLoaded] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  // Decided here: hidden at once, before the read the feed's event brings confirms it.
  const [decided, setDecided] = useState<ReadonlySet<number>>(new Set())
  const [notices, setNotices] = useState<ReadonlyArray<Notice>>([])
  const { policies, want } = usePolicies()
  const [now, setNow] = useState(Date.now())
  // "" shows every campaign's approvals; else one workflow's.
  const [campaign, setCampaign] = useState("")
  const [tab, setTab] = useState<"waiting" | "decided">("waiting")
  // Bumped on every change, so the Decided tab reads again when it is shown.
  const [changes, setChanges] = useState(0)

  // Reads overlap when changes come in a burst: only the newest read's answer is shown.
  const reads = useRef(0)
  const load = () => {
    const n = ++reads.current
    request<{ approvals: Approval[] }>("GET", "/api/approvals?status=pending&order=time_left&limit=100").then(
      (r) => {
        if (n !== reads.current) return
        setPending(r.approvals)
        setLoaded(true)
        setError(undefined)
        want(r.approvals.map((a) => a.workflow_id))
      },
      (e: unknown) => n === reads.current && setError(e),
    )
  }
  useInterval(load, POLL_MS)
  // Each change names one approval; the queue is read again rather than patched, so what is shown is
  // always the API's answer.
  useApprovalChanges(() => {
    load()
    setChanges((c) => c + 1)
  })
  useInterval(() => setNow(Date.now()), 1_000)

  // A hold running out changes no approval (no event): the queue is read again just after, so the
  // card moves to "After the call" with the API's phase.
  const nextHoldEnd = Math.min(
    ...pending.filter((a) => a.phase === "on_hold").map((a) => holdUntil(a) ?? Number.POSITIVE_INFINITY),
  )
  useEffect(() => {
    if (!Number.isFinite(nextHoldEnd)) return
    const t = setTimeout(load, Math.max(0, nextHoldEnd - Date.now()) + 1_000)
    return () => clearTimeout(t)
  }, [nextHoldEnd])

  const waiting = pending.filter((a) => !decided.has(a.id) && Date.parse(a.expires_at) > now)
  const campaigns = [...new Set([...waiting.map((a) => a.workflow_id), ...(campaign === "" ? [] : [Number(campaign)])])]
  const nameOf = (id: number) =>
    policies.get(id)?.name ?? waiting.find((a) => a.workflow_id === id)?.workflow_name ?? `Campaign ${id}`
  const shown = waiting.filter((a) => campaign === "" || String(a.workflow_id) === campaign)
  const held = shown.filter((a) => isHeld(a, now))
  const after = shown.filter((a) => !isHeld(a, now))
  const onHoldNow = held.length > 0 ? ` ${held.length} on hold now.` : ""
  const onDecided = (a: Approval) => (d: Parameters<typeof noticeOf>[1]) => {
    setDecided((s) => new Set(s).add(a.id))
    setNotices((ns) => [noticeOf(a, d), ...ns.filter((x) => x.id !== a.id)].slice(0, 5))
  }
  const card = (a: Approval) => (
    <ApprovalCard
      key={a.id}
      approval={a}
      policy={policies.get(a.workflow_id)}
      held={isHeld(a, now)}
      now={now}
      onDecided={onDecided(a)}
    />
  )

  return (
    <section aria-labelledby="approvals-h">
      <h1 id="approvals-h">Approvals</h1>
      <p class="muted" aria-live="polite">
        {loaded ? `${waiting.length} waiting for a decision.${onHoldNow}` : "Loading…"}
      </p>
      <Notices notices={notices} />
      {(campaigns.length > 1 || campaign !== "") && (
        <Field label="Campaign">
          {(id) => (
            <select id={id} value={campaign} onChange={(e) => setCampaign(e.currentTarget.value)}>
              <option value="">Every campaign</option>
              {campaigns.map((w) => (
                <option key={w} value={String(w)}>
                  {nameOf(w)}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <ErrorText error={error} />
      <Tabs
        label="Approvals"
        selected={tab}
        onSelect={(t) => setTab(t as "waiting" | "decided")}
        tabs={[
          {
            id: "waiting",
            title: "Waiting",
            panel: (
              <>
                {loaded && shown.length === 0 && <p class="muted">Nothing waiting for a decision.</p>}
                {held.length > 0 && (
                  <section aria-labelledby="onhold-h">
                    <h2 id="onhold-h">On hold now</h2>
                    <p class="hint">The callee is waiting on the line: they hear your decision at once.</p>
                    <div class="cards">{held.map(card)}</div>
                  </section>
                )}
                {after.length > 0 && (
                  <section aria-labelledby="after-h">
                    <h2 id="after-h">After the call</h2>
                    <p class="hint">
                      These calls have ended. A decision still counts until its time runs out, and changes the call's
                      result; each card says how.
                    </p>
                    <div class="cards">{after.map(card)}</div>
                  </section>
                )}
              </>
            ),
          },
          {
            id: "decided",
            title: "Decided",
            panel: tab === "decided" ? <DecidedList campaign={campaign} changes={changes} /> : null,
          },
        ]}
      />
    </section>
  )
}

function ApprovalCard({
  approval: a,
  policy,
  held,
  now,
  onDecided,
}: {
  readonly approval: Approval
  readonly policy: Policy | undefined
  readonly held: boolean
  readonly now: number
  readonly onDecided: Parameters<typeof DecideControls>[0]["onDecided"]
}) {
  const { can } = useAccess()
  const left = holdLeft(holdUntil(a), now)
  const transcript = Array.isArray(a.context?.transcript) ? (a.context.transcript as unknown[]).map(String) : []
  const heading = `approval-${a.id}`
  const campaign = policy?.name ?? a.workflow_name ?? `Campaign ${a.workflow_id}`

  return (
    <article class={held ? "panel card-held" : "panel card-late"} aria-labelledby={heading}>
      <h3 id={heading}>
        {proposedActionWords(a.proposed_action)} for {calleeOf(a)}
      </h3>
      {held ? (
        <p class="hold-line">
          <strong>{phaseWords("on_hold")}</strong>
          {left !== undefined && (
            <>
              {" · "}
              <span role="timer" class={left < 10 ? "error" : undefined}>
                {duration(left)} left
              </span>
            </>
          )}
        </p>
      ) : (
        <p class="late-line">
          <span class="badge">Call ended</span> Decide by {new Date(a.expires_at).toLocaleString()}.
        </p>
      )}
      {can("supervise") ? (
        <DecideControls approval={a} policy={policy} late={!held} onDecided={onDecided} />
      ) : (
        <p class="hint">Supervisors, admins and the owner decide approvals.</p>
      )}
      <dl class="kv">
        <dt>Campaign</dt>
        <dd>{campaign}</dd>
        {a.proposed_value_minor !== null && (
          <>
            <dt>Asked</dt>
            <dd>{money(a.proposed_value_minor, a.currency)}</dd>
          </>
        )}
        {a.proposed_action === "concession" && (
          <>
            <dt>Cap</dt>
            <dd>{policy?.capMinor !== undefined ? money(policy.capMinor, a.currency) : "…"}</dd>
          </>
        )}
        {a.rationale && (
          <>
            <dt>Why</dt>
            <dd>{a.rationale}</dd>
          </>
        )}
      </dl>
      {transcript.length > 0 && (
        <>
          <h4>Recent conversation</h4>
          <ol class="transcript">
            {transcript.map((line, i) => (
              <li key={i} class={line.startsWith("agent:") ? "agent" : undefined}>
                {line}
              </li>
            ))}
          </ol>
        </>
      )}
    </article>
  )
}

/** Decided (and expired) approvals, newest first: who decided what, when, and what it did. */
function DecidedList({ campaign, changes }: { readonly campaign: string; readonly changes: number }) {
  const [rows, setRows] = useState<ReadonlyArray<Approval> | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  useEffect(() => {
    let live = true
    const filter = campaign === "" ? "" : `&workflow_id=${campaign}`
    request<{ approvals: Approval[] }>("GET", `/api/approvals?limit=${DECIDED_LIMIT}${filter}`).then(
      (r) => {
        if (!live) return
        const when = (a: Approval) => Date.parse(a.decided_at ?? a.expires_at)
        setRows(r.approvals.filter((a) => a.status !== "pending").sort((x, y) => when(y) - when(x)))
        setError(undefined)
      },
      (e: unknown) => live && setError(e),
    )
    return () => {
      live = false
    }
  }, [campaign, changes])
  if (error) return <ErrorText error={error} />
  if (rows === undefined) return <p>Loading…</p>
  return (
    <Table<Approval>
      caption="Decided approvals, newest first"
      rows={rows}
      rowKey={(a) => a.id}
      empty="Nothing decided yet."
      columns={[
        {
          title: "When",
          cell: (a) => new Date(a.decided_at ?? a.expires_at).toLocaleString(),
          sort: (a) => Date.parse(a.decided_at ?? a.expires_at),
        },
        { title: "Callee", cell: (a) => calleeOf(a), sort: (a) => a.target_name ?? a.target_phone },
        {
          title: "Asked",
          cell: (a) =>
            a.proposed_value_minor === null
              ? proposedActionWords(a.proposed_action)
              : `${proposedActionWords(a.proposed_action)} of ${money(a.proposed_value_minor, a.currency)}`,
        },
        {
          title: "Decision",
          cell: (a) => (
            <>
              <span class="nowrap">
                {a.status === "approved" && a.proposed_action === "concession" && a.approved_value_minor != null
                  ? `${approvalStatusWords(a.status)} at ${money(a.approved_value_minor, a.currency)}`
                  : approvalStatusWords(a.status)}
              </span>
              {a.decided_phase && (
                <>
                  <br />
                  <span class="muted">{decidedPhaseWords(a.decided_phase)}</span>
                </>
              )}
            </>
          ),
          sort: (a) => a.status,
        },
        {
          title: "By",
          cell: (a) => decidedByWords(a.decided_by_kind ?? null, a.decided_by_name ?? null, a.decided_by_email ?? null),
          sort: (a) => a.decided_by_name ?? "",
        },
        {
          title: "What it did",
          cell: (a) => (
            <span class="cell-prose">
              {a.effect ?? (a.status === "expired" ? "Nothing: no one decided in time." : "—")}
            </span>
          ),
        },
        {
          title: "Campaign",
          cell: (a) => a.workflow_name ?? `Campaign ${a.workflow_id}`,
          sort: (a) => a.workflow_name ?? "",
        },
        { title: "Note", cell: (a) => a.note ?? "" },
      ]}
    />
  )
}
