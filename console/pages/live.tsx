// Live calls: the workspace's calls in flight (GET /api/runs/live, polled), by callee and campaign
// name; a call whose callee holds for a decision is marked, with the time left and, for whoever may
// supervise, Approve and Deny (a concession's amount within the cap) in a row under it. One transcript
// column per watched call, streamed over EventSource. The stream sets each event's id to the turn's
// seq, so a dropped connection resumes with Last-Event-ID by itself, and one the browser gave up
// on is reopened by "Reconnect" from the highest seq shown; turns are kept by seq, so a turn that
// arrives twice is shown once and the order is the run's. An ended call shows its analysis. One call at
// a time may be listened to (its audio, both sides, through ../listen.ts) while this page is open, and,
// for whoever may supervise, taken over from there: handed to a person at an operator number.
import { Fragment } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { ApiError, request } from "../api.js"
import { useApprovalChanges } from "../approvals-feed.js"
import { type Listening, type ListenStatus, listenTo } from "../listen.js"
import { Button, duration, ErrorText, Field, money, useInterval } from "../ui.js"
import {
  callStatusWords,
  fieldWords,
  outcomeWords,
  phaseWords,
  proposedActionWords,
  sentence,
  sentimentWords,
  takeOverRefusalWords,
} from "../words.js"
import {
  type Approval,
  calleeOf,
  DecideControls,
  holdLeft,
  type Notice,
  Notices,
  noticeOf,
  usePolicies,
} from "./decide.js"

interface LiveCall {
  readonly call_id: number
  readonly run_id: number
  readonly workflow_id: number
  readonly workflow_name?: string | null
  readonly target_id: number
  readonly phone_e164: string
  readonly target_name?: string | null
  readonly status: string
  readonly attempt: number
  readonly started_at: string
  readonly answered_at: string | null
  readonly turns: number
  /** While the callee holds for a human's decision on that approval. */
  readonly on_hold?: { readonly approval_id: number; readonly hold_until: string | null } | null
}

interface Turn {
  readonly seq: number
  readonly call_id: number
  readonly speaker: "agent" | "callee" | "system"
  readonly text: string
  readonly at: string
}

/** The post-call analysis of GET /api/calls/{id} (only the fields shown here). */
interface Analysis {
  readonly status: "pending" | "done" | "failed"
  readonly summary: string | null
  readonly goal_met: boolean | null
  readonly sentiment: "positive" | "neutral" | "negative" | null
  readonly fields: Readonly<Record<string, unknown>>
}

/** What GET /api/calls/{id} tells about a finished call (only the fields shown here). */
interface CallResult {
  readonly status: string
  readonly outcome: string | null
  readonly talk_seconds: number
  /** null: the call never connected, or the workflow's analysis is off. */
  readonly analysis: Analysis | null
}

const POLL_MS = 2_000
/** How long an ended call's outcome and analysis are waited for (the analysis runs after hangup). */
const RESULT_POLL_MS = 2_000
const RESULT_POLLS_MAX = 90
/** Transcript columns and the call listened to, together: each holds a stream open. */
const MAX_STREAMS = 4

let remembered: ReadonlyArray<LiveCall> = []

/** A session that ends (however) forgets what was watched: the next may be another workspace's. */
export function forgetWatched(): void {
  remembered = []
}

export function LivePage() {
  const [calls, setCalls] = useState<ReadonlyArray<LiveCall>>([])
  const [error, setError] = useState<unknown>(undefined)
  // Watched calls stay watched after they end, so their outcome can be read, and while the
  // supervisor visits another page (kept for the tab's life, not stored).
  const [watched, setWatchedState] = useState<ReadonlyArray<LiveCall>>(remembered)
  const setWatched = (w: ReadonlyArray<LiveCall>) => {
    remembered = w
    setWatchedState(w)
  }
  const [now, setNow] = useState(Date.now())
  // The approvals held calls wait for (their amount, cap and reason), read when the held set changes
  // and whenever the approvals feed says one changed.
  const [held, setHeld] = useState<ReadonlyMap<number, Approval>>(new Map())
  const [decided, setDecided] = useState<ReadonlySet<number>>(new Set())
  const [notices, setNotices] = useState<ReadonlyArray<Notice>>([])
  const { policies, want } = usePolicies()
  const { can } = useAccess()
  // The call listened to, if any; its stream and audio stop when another is chosen or the page goes
  // (signing out unmounts it).
  const [listening, setListening] = useState<{ readonly call: LiveCall; readonly handle: Listening } | undefined>()
  useEffect(() => () => listening?.handle.stop(), [listening])

  const readLive = () =>
    request<{ calls: LiveCall[] }>("GET", "/api/runs/live").then(
      (r) => {
        setCalls(r.calls)
        setError(undefined)
      },
      (e: unknown) => setError(e),
    )
  useInterval(readLive, POLL_MS)
  // Talk time and hold time tick between polls.
  useInterval(() => setNow(Date.now()), 1_000)

  const holdIds = calls.flatMap((c) => (c.on_hold ? [c.on_hold.approval_id] : []))
  const readHeld = () => {
    const asked = holdIds
    if (asked.length === 0) return
    request<{ approvals: Approval[] }>(
      "GET",
      "/api/approvals?status=pending&phase=on_hold&order=time_left&limit=100",
    ).then(
      (r) => {
        const pending = new Map(r.approvals.map((a) => [a.id, a]))
        setHeld(pending)
        want(r.approvals.map((a) => a.workflow_id))
        // Held a moment ago and no longer waiting: decided elsewhere (or its hold ran out), so its row
        // stops offering a decision before the next poll of the calls says so.
        const gone = asked.filter((id) => !pending.has(id))
        if (gone.length > 0) setDecided((d) => new Set([...d, ...gone]))
      },
      () => undefined,
    )
  }
  const heldKey = holdIds.filter((id) => !held.has(id) && !decided.has(id)).join(",")
  useEffect(readHeld, [heldKey])
  // An approval changed (decided here or by another supervisor, expired, or a new one): the calls and
  // what they wait for are read again at once.
  useApprovalChanges(() => {
    void readLive()
    readHeld()
  })

  const isWatched = (c: LiveCall) => watched.some((w) => w.call_id === c.call_id)
  const isListened = (c: LiveCall) => listening?.call.call_id === c.call_id
  // Each column, and listening, holds a stream open, and a browser gives one origin only six HTTP/1.1
  // connections: past four such streams (and the approvals feed) the polls would queue behind them.
  const full = watched.length + (listening === undefined ? 0 : 1) >= MAX_STREAMS
  const toggle = (c: LiveCall) =>
    setWatched(isWatched(c) ? watched.filter((w) => w.call_id !== c.call_id) : full ? watched : [...watched, c])
  // The audio starts in the click itself: a browser lets a page play sound only after a user's gesture.
  const toggleListen = (c: LiveCall) => {
    if (isListened(c)) setListening(undefined)
    else if (!full || listening !== undefined) setListening({ call: c, handle: listenTo(c.call_id) })
  }
  const live = new Set(calls.map((c) => c.call_id))
  const onHold = (c: LiveCall) =>
    c.on_hold !== null &&
    c.on_hold !== undefined &&
    !decided.has(c.on_hold.approval_id) &&
    (c.on_hold.hold_until === null || Date.parse(c.on_hold.hold_until) > now)

  return (
    <section aria-labelledby="live-h">
      <h1 id="live-h">Live calls</h1>
      <ErrorText error={error} />
      <Notices notices={notices} />
      {calls.length === 0 ? (
        <p class="muted">No calls in flight. Run a workflow from Campaigns; its calls appear here.</p>
      ) : (
        <>
          {calls.some(onHold) && (
            <p class="hold-line" data-testid="held-count">
              <strong>
                {calls.filter(onHold).length === 1
                  ? "1 callee is on hold, waiting for you."
                  : `${calls.filter(onHold).length} callees are on hold, waiting for you.`}
              </strong>
            </p>
          )}
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take the focus to be scrolled by keys */}
          <section class="table-wrap" aria-label="Calls in flight" tabIndex={0}>
            <table>
              <caption class="visually-hidden">Calls in flight</caption>
              <thead>
                <tr>
                  <th scope="col">Callee</th>
                  <th scope="col">Campaign</th>
                  <th scope="col">Status</th>
                  <th scope="col">Talk time</th>
                  <th scope="col">Turns</th>
                  <th scope="col">Transcript</th>
                  <th scope="col">Audio</th>
                </tr>
              </thead>
              <tbody>
                {calls.map((c) => {
                  const holding = onHold(c)
                  const approval = holding ? held.get(c.on_hold!.approval_id) : undefined
                  const left = holding
                    ? holdLeft(c.on_hold!.hold_until ? Date.parse(c.on_hold!.hold_until) : undefined, now)
                    : undefined
                  return (
                    <Fragment key={c.call_id}>
                      <tr class={holding ? "row-held" : undefined}>
                        <td>
                          {c.target_name ? (
                            <>
                              {c.target_name}
                              <br />
                              <span class="muted">{c.phone_e164}</span>
                            </>
                          ) : (
                            c.phone_e164
                          )}
                        </td>
                        <td>{c.workflow_name ?? `Campaign ${c.workflow_id}`}</td>
                        <td>
                          {holding ? (
                            <span class="held" data-testid="on-hold">
                              <strong>{phaseWords("on_hold")}</strong>
                              {left !== undefined && (
                                <>
                                  <br />
                                  <span role="timer" class={left < 10 ? "error" : undefined}>
                                    {duration(left)} left
                                  </span>
                                </>
                              )}
                            </span>
                          ) : (
                            <span class={`badge badge-${c.status}`}>{callStatusWords(c.status)}</span>
                          )}
                        </td>
                        <td>{c.answered_at ? duration((now - Date.parse(c.answered_at)) / 1000) : "—"}</td>
                        <td>{c.turns}</td>
                        <td>
                          <Button
                            aria-pressed={isWatched(c)}
                            disabled={full && !isWatched(c)}
                            onClick={() => toggle(c)}
                          >
                            {isWatched(c) ? "Stop watching" : "Watch"}
                            <span class="visually-hidden"> {c.phone_e164}</span>
                          </Button>
                        </td>
                        <td>
                          <Button
                            aria-pressed={isListened(c)}
                            disabled={full && listening === undefined}
                            onClick={() => toggleListen(c)}
                          >
                            {isListened(c) ? "Stop listening" : "Listen"}
                            <span class="visually-hidden"> {c.phone_e164}</span>
                          </Button>
                        </td>
                      </tr>
                      {holding && (
                        <tr class="row-decide">
                          <td colSpan={7}>
                            <HeldDecision
                              approval={approval}
                              canDecide={can("supervise")}
                              policy={approval ? policies.get(approval.workflow_id) : undefined}
                              onDecided={(a, d) => {
                                setDecided((s) => new Set(s).add(a.id))
                                setNotices((ns) => [noticeOf(a, d), ...ns.filter((x) => x.id !== a.id)].slice(0, 5))
                              }}
                            />
                          </td>
                        </tr>
                      )}
                    </Fragment>
                  )
                })}
              </tbody>
            </table>
          </section>
        </>
      )}
      {full && (
        <p class="hint">
          Following {MAX_STREAMS} calls (transcripts and listening), the most at once; close one to follow another.
        </p>
      )}
      {listening && (
        <ListenPanel
          key={listening.call.call_id}
          call={listening.call}
          handle={listening.handle}
          canTakeOver={can("supervise")}
          onClose={() => setListening(undefined)}
        />
      )}
      {watched.length > 0 && (
        <div class="columns">
          {watched.map((c) => (
            <Transcript
              key={c.call_id}
              call={calls.find((x) => x.call_id === c.call_id) ?? c}
              ended={!live.has(c.call_id)}
              onClose={() => toggle(c)}
            />
          ))}
        </div>
      )}
    </section>
  )
}

const LISTEN_WORDS: Readonly<Record<ListenStatus["state"], string>> = {
  connecting: "Connecting to the call's audio…",
  playing: "Playing the call as it happens, both sides, under half a second behind.",
  reconnecting: "The audio stopped; reconnecting…",
  ended: "The call has ended.",
  stopped: "Stopped.",
  failed: "The call's audio could not be played.",
}

/**
 * The call listened to: what is happening, and Stop. Its counts (samples decoded, and handed to the
 * audio graph) are on the region as data-samples-decoded and data-samples-played, for tests.
 */
function ListenPanel({
  call,
  handle,
  canTakeOver,
  onClose,
}: {
  readonly call: LiveCall
  readonly handle: Listening
  readonly canTakeOver: boolean
  readonly onClose: () => void
}) {
  const [status, setStatus] = useState<ListenStatus>(handle.status)
  useEffect(() => {
    handle.onChange(setStatus)
    setStatus(handle.status)
    return () => handle.onChange(() => undefined)
  }, [handle])
  const over = status.state === "ended" || status.state === "failed" || status.state === "stopped"
  // Its audio failing (not heard as audio, too many listeners) leaves the call live: it may still be taken over.
  const ended = status.state === "ended" || status.error?.code === "CALL_NOT_LIVE"
  return (
    <section
      class="panel listen"
      aria-label={`Listening to the call to ${call.phone_e164}`}
      data-state={status.state}
      data-samples-decoded={status.decoded}
      data-samples-played={status.played}
    >
      <h2>Listening to {call.target_name ? `${call.target_name} (${call.phone_e164})` : call.phone_e164}</h2>
      <p role="status">{LISTEN_WORDS[status.state]}</p>
      {status.error && <ErrorText error={status.error} />}
      <div class="actions">
        <Button onClick={onClose}>{over ? "Close" : "Stop listening"}</Button>
      </div>
      {canTakeOver && <TakeOver call={call} ended={ended} />}
    </section>
  )
}

/** What POST /api/calls/{id}/take-over answers (only the fields shown here). */
interface TakenOver {
  readonly operator_number: string
}

/**
 * Take over: the callee is handed to a person at the operator number typed (empty: the deployment's
 * own), through POST /api/calls/{id}/take-over, which answers once the operator's phone is answered.
 */
function TakeOver({ call, ended }: { readonly call: LiveCall; readonly ended: boolean }) {
  const [asking, setAsking] = useState(false)
  const [number, setNumber] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [done, setDone] = useState<TakenOver | undefined>(undefined)
  if (done !== undefined)
    return (
      <p role="status" data-testid="taken-over">
        Handed over: the callee is in a recorded conference and {done.operator_number} is joining it; the agent has left
        the call.
      </p>
    )
  // Refused or failed, the words stay after the call ends (a failed hand-over ends it).
  const refusal =
    error instanceof ApiError && error.fieldError("operator_number") === undefined
      ? (takeOverRefusalWords(error.code) ?? error)
      : error
  if (!asking || (ended && !busy))
    return (
      <>
        <ErrorText error={refusal} />
        {!ended && (
          <div class="actions">
            <Button onClick={() => setAsking(true)}>Take over</Button>
          </div>
        )}
      </>
    )
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    const operator = number.trim()
    try {
      setDone(
        await request<TakenOver>(
          "POST",
          `/api/calls/${call.call_id}/take-over`,
          operator === "" ? {} : { operator_number: operator },
        ),
      )
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const numberError = error instanceof ApiError ? error.fieldError("operator_number") : undefined
  return (
    <form class="take-over" onSubmit={submit} noValidate aria-label={`Take over the call to ${call.phone_e164}`}>
      <Field
        label="Operator number"
        error={numberError === undefined ? undefined : sentence(`${fieldWords("operator_number")} ${numberError}`)}
        hint={
          "The person to hand the call to, in international form (+14155550100). Left empty: the operator " +
          "number set up for this deployment."
        }
      >
        {(id, d) => (
          <input
            id={id}
            type="tel"
            autoComplete="tel"
            aria-describedby={d}
            value={number}
            disabled={busy}
            onInput={(e) => setNumber(e.currentTarget.value)}
          />
        )}
      </Field>
      <ErrorText error={refusal} besideFields={["operator_number"]} />
      {busy && <p role="status">Calling the operator; the call is handed over once they answer…</p>}
      <div class="actions">
        <Button type="submit" kind="primary" busy={busy}>
          Hand the call over
        </Button>
        <Button
          disabled={busy}
          onClick={() => {
            setAsking(false)
            setError(undefined)
          }}
        >
          Cancel
        </Button>
      </div>
    </form>
  )
}

/** The decision a held call waits for, in its row: what is asked, and Approve or Deny. */
function HeldDecision({
  approval: a,
  canDecide,
  policy,
  onDecided,
}: {
  readonly approval: Approval | undefined
  readonly canDecide: boolean
  readonly policy: Parameters<typeof DecideControls>[0]["policy"]
  readonly onDecided: (a: Approval, d: Parameters<Parameters<typeof DecideControls>[0]["onDecided"]>[0]) => void
}) {
  if (a === undefined) return <p class="muted">Reading what the callee asks for…</p>
  const asked =
    a.proposed_value_minor === null
      ? proposedActionWords(a.proposed_action)
      : `${proposedActionWords(a.proposed_action)} of ${money(a.proposed_value_minor, a.currency)}`
  return (
    <section class="held-decision" aria-label={`Decision for ${calleeOf(a)}`}>
      <p>
        <strong>{asked}</strong>
        {a.rationale && <> — {a.rationale}</>} <a href="#/approvals">See it in Approvals</a>
      </p>
      {canDecide ? (
        <DecideControls approval={a} policy={policy} late={false} withNote={false} onDecided={(d) => onDecided(a, d)} />
      ) : (
        <p class="hint">Supervisors, admins and the owner decide approvals.</p>
      )}
    </section>
  )
}

function Transcript({
  call,
  ended,
  onClose,
}: {
  readonly call: LiveCall
  readonly ended: boolean
  readonly onClose: () => void
}) {
  const [turns, setTurns] = useState<ReadonlyArray<Turn>>([])
  const [state, setState] = useState<"connecting" | "open" | "reconnecting" | "closed">("connecting")
  const [result, setResult] = useState<CallResult | undefined>(undefined)
  const [resultError, setResultError] = useState<unknown>(undefined)
  // The highest seq shown: where a stream reopened by hand resumes.
  const lastSeq = useRef<number | undefined>(undefined)
  // Bumped by "Reconnect": a new stream for a column whose stream the browser gave up on.
  const [opened, setOpened] = useState(0)

  // The call is over and its outcome read; a few seconds on, its last turns are in and the stream
  // can go (freeing the connection for another column).
  const [finished, setFinished] = useState(false)
  useEffect(() => {
    if (result?.outcome === undefined || result.outcome === null) return
    const t = setTimeout(() => setFinished(true), 3_000)
    return () => clearTimeout(t)
  }, [result?.outcome])
  useEffect(() => {
    if (finished) {
      setState("closed")
      return
    }
    const since = lastSeq.current === undefined ? "" : `&since_seq=${lastSeq.current}`
    const source = new EventSource(`/api/runs/${call.run_id}/turns/stream?target_id=${call.target_id}${since}`)
    setState("connecting")
    const seen = new Set<number>()
    source.onopen = () => setState("open")
    source.onmessage = (e: MessageEvent<string>) => {
      let t: Turn
      try {
        t = JSON.parse(e.data) as Turn
      } catch {
        return
      }
      // The stream is the target's; a later attempt at the same number is another call's column.
      if (typeof t.seq !== "number" || seen.has(t.seq) || t.call_id !== call.call_id) return
      seen.add(t.seq)
      if (lastSeq.current === undefined || t.seq > lastSeq.current) lastSeq.current = t.seq
      setTurns((prev) => insertBySeq(prev, t))
    }
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        setState("closed")
        // The browser gives up on a refused stream without saying why: ask whether the session is
        // still good (a 401 there sends the page back to sign-in).
        request("GET", "/auth/me").catch(() => undefined)
      } else setState("reconnecting")
    }
    return () => source.close()
  }, [call.run_id, call.target_id, call.call_id, finished, opened])

  // Once the call has left the live list, its outcome and talk time come from the call itself, and
  // then its analysis, which the runtime writes a little after hangup.
  useEffect(() => {
    if (!ended) return
    let live = true
    let polls = 0
    let timer: ReturnType<typeof setTimeout> | undefined
    const load = () =>
      request<CallResult>("GET", `/api/calls/${call.call_id}`).then(
        (r) => {
          if (!live) return
          setResult(r)
          const waiting = r.outcome === null || r.analysis?.status === "pending"
          if (waiting && ++polls < RESULT_POLLS_MAX) timer = setTimeout(load, RESULT_POLL_MS)
        },
        (e: unknown) => live && setResultError(e),
      )
    load()
    return () => {
      live = false
      clearTimeout(timer)
    }
  }, [ended, call.call_id])

  const talk = result
    ? duration(result.talk_seconds)
    : call.answered_at
      ? duration((Date.now() - Date.parse(call.answered_at)) / 1000)
      : "—"
  return (
    <section class="panel" aria-label={`Transcript of the call to ${call.phone_e164}`}>
      <h2>{call.phone_e164}</h2>
      <dl class="kv">
        <dt>Status</dt>
        <dd>{callStatusWords(ended ? (result?.status ?? "ended") : call.status)}</dd>
        <dt>Outcome</dt>
        <dd>{ended ? (result?.outcome ? outcomeWords(result.outcome) : "…") : "in progress"}</dd>
        <dt>Talk time</dt>
        <dd>{talk}</dd>
        <dt>Stream</dt>
        <dd>{state}</dd>
      </dl>
      {resultError instanceof ApiError && resultError.status !== 404 && <ErrorText error={resultError} />}
      <ol class="transcript" aria-live="polite" aria-label="Turns">
        {turns.map((t) => (
          <li key={t.seq} class={t.speaker}>
            <span class="speaker">
              {t.speaker === "callee" ? "Callee" : t.speaker === "agent" ? "Agent" : "System"}
            </span>
            {t.text}
          </li>
        ))}
      </ol>
      {result?.analysis && <AnalysisView analysis={result.analysis} />}
      <div class="actions">
        {state === "closed" && !finished && <Button onClick={() => setOpened((n) => n + 1)}>Reconnect</Button>}
        <Button onClick={onClose}>Close</Button>
      </div>
    </section>
  )
}

/** An extracted field's value in words (the API gives JSON values: text, numbers, yes/no, dates). */
function fieldValue(v: unknown): string {
  if (v === null || v === undefined) return "—"
  if (typeof v === "boolean") return v ? "yes" : "no"
  if (typeof v === "string" || typeof v === "number") return String(v)
  return JSON.stringify(v)
}

function AnalysisView({ analysis: a }: { readonly analysis: Analysis }) {
  return (
    <section class="analysis" aria-label="Analysis">
      <h3>Analysis</h3>
      {a.status === "pending" ? (
        <p class="muted">Analysing the call…</p>
      ) : a.status === "failed" ? (
        <p class="muted">The call could not be analysed.</p>
      ) : (
        <dl class="kv">
          <dt>Summary</dt>
          <dd>{a.summary ?? "—"}</dd>
          <dt>Goal met</dt>
          <dd>{a.goal_met === null ? "—" : a.goal_met ? "Yes" : "No"}</dd>
          <dt>Sentiment</dt>
          <dd>{sentimentWords(a.sentiment)}</dd>
          {Object.entries(a.fields).map(([name, value]) => (
            <Fragment key={name}>
              <dt>{name}</dt>
              <dd>{fieldValue(value)}</dd>
            </Fragment>
          ))}
        </dl>
      )}
    </section>
  )
}

/** `prev` with `t` in seq order; turns almost always arrive in order, so this is an append. */
function insertBySeq(prev: ReadonlyArray<Turn>, t: Turn): ReadonlyArray<Turn> {
  const last = prev[prev.length - 1]
  if (last === undefined || last.seq < t.seq) return [...prev, t]
  if (prev.some((p) => p.seq === t.seq)) return prev
  const next = [...prev, t]
  next.sort((a, b) => a.seq - b.seq)
  return next
}
