// The call drawer: one result row's call, opened from the results table: its transcript and
// analysis (GET /api/calls/{id}), and latency when the call reports it. The row names its target;
// its calls are found on the number's timeline (GET /api/timeline?phone=), the newest attempt first.
import { Fragment } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { request } from "../api.js"
import { Drawer, duration, ErrorText, Field, money } from "../ui.js"
import { analysisStatusWords, callStatusWords, outcomeWords, sentimentWords, spaced } from "../words.js"

/** One row of GET /api/runs/{id}/results. */
export interface ResultRow {
  readonly target_id: number
  /** The target's latest call, when the API names it. */
  readonly call_id?: number | null
  readonly phone: string
  readonly name: string | null
  readonly status: string
  readonly outcome: string | null
  readonly attempts: number
  readonly talk_seconds: number
  readonly cost_minor: number
  readonly analysis_status: string | null
  readonly summary: string | null
  readonly goal_met: boolean | null
  readonly sentiment: string | null
  readonly callback_at: string | null
  readonly agreed_value_minor: number | null
  /** What a decision made after the call did to this result, as a sentence (approved after the call…). */
  readonly decision_effect?: string | null
  readonly fields: Readonly<Record<string, unknown>>
}

interface Call {
  readonly id: number
  readonly attempt: number
  readonly status: string
  readonly outcome: string | null
  readonly started_at: string
  readonly answered_at: string | null
  readonly ended_at: string | null
  readonly talk_seconds: number
  readonly cost_minor: number | null
  readonly currency: string
  readonly transcript: ReadonlyArray<{
    readonly seq: number
    readonly speaker: "agent" | "callee" | "system"
    readonly text: string
    /** A call heard as audio: an agent turn the callee spoke over (the text is what they heard). */
    readonly interrupted?: true
    /** A call heard as audio: end of the callee's speech to this turn's first audio, by stage (ms). */
    readonly latency_ms?: Readonly<Record<string, number>>
  }>
  readonly transcript_truncated: boolean
  /** Hosted speech vendors that failed the call: it went on with the offline engine from then. */
  readonly provider_failures?: ReadonlyArray<{
    readonly at: string
    readonly stage: "recognition" | "synthesis"
    readonly provider: string
    readonly message: string
  }>
  readonly analysis: {
    readonly status: string
    readonly summary: string | null
    readonly goal_met: boolean | null
    readonly sentiment: string | null
    readonly callback_at: string | null
    readonly agreed_value_minor: number | null
    readonly fields: Readonly<Record<string, unknown>>
  } | null
  /** A recorded call heard as audio: where to play it, and where in it each turn began. */
  readonly recording?: {
    readonly url: string
    readonly duration_ms: number
    readonly expires_at: string
    readonly cues: ReadonlyArray<{ readonly at_ms: number; readonly speaker: "agent" | "callee" }>
  } | null
  /** Response times, when the call reports them (milliseconds, by name, or one figure). */
  readonly latency?: Readonly<Record<string, unknown>> | null
  readonly latency_ms?: number | null
}

interface TimelineEvent {
  readonly kind: string
  readonly run_id: number | null
  readonly payload: { readonly call_id?: number; readonly target_id?: number; readonly attempt?: number }
}

/** The target's calls in this run, newest attempt first. */
async function callsOf(runId: number, row: ResultRow): Promise<ReadonlyArray<{ id: number; attempt: number }>> {
  const t = await request<{ events: TimelineEvent[] }>(
    "GET",
    `/api/timeline?phone=${encodeURIComponent(row.phone)}&n=200`,
  )
  const found = t.events
    .filter((e) => e.kind === "call" && e.run_id === runId && e.payload.target_id === row.target_id)
    .map((e) => ({ id: Number(e.payload.call_id), attempt: Number(e.payload.attempt ?? 1) }))
    .filter((c) => Number.isInteger(c.id))
    .sort((a, b) => b.attempt - a.attempt)
  if (found.length === 0 && typeof row.call_id === "number") return [{ id: row.call_id, attempt: row.attempts }]
  return found
}

const SPEAKERS = { agent: "Agent", callee: "Callee", system: "System" } as const

export function CallDrawer({
  runId,
  row,
  currency,
  onClose,
}: {
  readonly runId: number
  readonly row: ResultRow
  readonly currency: string
  readonly onClose: () => void
}) {
  const [calls, setCalls] = useState<ReadonlyArray<{ id: number; attempt: number }> | undefined>(undefined)
  const [chosen, setChosen] = useState<number | undefined>(undefined)
  const [call, setCall] = useState<Call | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)

  useEffect(() => {
    let live = true
    callsOf(runId, row).then(
      (cs) => {
        if (!live) return
        setCalls(cs)
        setChosen(cs[0]?.id)
      },
      (e: unknown) => live && setError(e),
    )
    return () => {
      live = false
    }
  }, [runId, row.target_id])

  useEffect(() => {
    if (chosen === undefined) return
    let live = true
    setCall(undefined)
    request<Call>("GET", `/api/calls/${chosen}`).then(
      (c) => live && setCall(c),
      (e: unknown) => live && setError(e),
    )
    return () => {
      live = false
    }
  }, [chosen])

  const who = row.name ? `${row.name} (${row.phone})` : row.phone
  return (
    <Drawer title={`Call to ${who}`} onClose={onClose}>
      <ErrorText error={error} />
      {calls === undefined && error === undefined && <p>Loading…</p>}
      {calls !== undefined && calls.length === 0 && (
        <p class="muted">
          No call was placed to this number in this run ({outcomeWords(row.outcome ?? row.status).toLowerCase()}).
        </p>
      )}
      {calls !== undefined && calls.length > 1 && (
        <Field label="Attempt">
          {(id) => (
            <select id={id} value={String(chosen)} onChange={(e) => setChosen(Number(e.currentTarget.value))}>
              {calls.map((c) => (
                <option key={c.id} value={String(c.id)}>
                  Attempt {c.attempt}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      {chosen !== undefined && call === undefined && error === undefined && <p>Loading the call…</p>}
      {row.decision_effect && (
        <p class="hint" data-testid="decision-effect">
          Decided after the call: {row.decision_effect}
        </p>
      )}
      {call && <CallView call={call} currency={currency} />}
    </Drawer>
  )
}

/** Latency figures in words: "first reply: 820 ms", or a call heard as audio's replies. */
function latencyLines(call: Call): ReadonlyArray<string> {
  if (typeof call.latency_ms === "number") return [`${Math.round(call.latency_ms)} ms`]
  const replies = call.transcript.flatMap((t) => (t.latency_ms?.total === undefined ? [] : [t.latency_ms.total]))
  if (replies.length > 0) {
    const sorted = [...replies].sort((x, y) => x - y)
    const median = sorted[Math.floor(sorted.length / 2)]!
    return [`replies in ${median} ms (median of ${replies.length}), slowest ${sorted.at(-1)} ms`]
  }
  if (call.latency === null || call.latency === undefined) return []
  return Object.entries(call.latency)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => `${spaced(k.replace(/_ms$/, ""))}: ${Math.round(v as number)} ms`)
}

/** A reply's latency by stage, in words (the tooltip of "replied in … ms"). */
const stageWords = (l: Readonly<Record<string, number>>): string =>
  ["endpointing", "transcript", "model", "synthesis", "hop"]
    .filter((k) => typeof l[k] === "number")
    .map((k) => `${k} ${l[k]} ms`)
    .join(", ")

/**
 * The transcript turn being heard at `ms` of the recording: the recording's k-th turn of a speaker
 * (its cues) is that speaker's k-th turn in the transcript. -1 before the first.
 */
export function turnAt(call: Call, ms: number): number {
  const cues = call.recording?.cues ?? []
  let cue = -1
  for (let i = 0; i < cues.length && cues[i]!.at_ms <= ms; i++) cue = i
  if (cue < 0) return -1
  const speaker = cues[cue]!.speaker
  const k = cues.slice(0, cue).filter((c) => c.speaker === speaker).length
  let seen = 0
  for (let i = 0; i < call.transcript.length; i++) if (call.transcript[i]!.speaker === speaker && seen++ === k) return i
  return -1
}

function CallView({ call, currency }: { readonly call: Call; readonly currency: string }) {
  const a = call.analysis
  const latency = latencyLines(call)
  const [heard, setHeard] = useState(-1)
  const turns = useRef<HTMLOListElement>(null)
  useEffect(() => {
    if (heard >= 0) turns.current?.children[heard]?.scrollIntoView?.({ block: "nearest" })
  }, [heard])
  return (
    <>
      <dl class="kv">
        <dt>Attempt</dt>
        <dd>{call.attempt}</dd>
        <dt>State</dt>
        <dd>{callStatusWords(call.status)}</dd>
        <dt>Outcome</dt>
        <dd>{outcomeWords(call.outcome, "not known yet")}</dd>
        <dt>Started</dt>
        <dd>{new Date(call.started_at).toLocaleString()}</dd>
        <dt>Talk time</dt>
        <dd>{duration(call.talk_seconds)}</dd>
        <dt>Cost</dt>
        <dd>{call.cost_minor === null ? "—" : money(call.cost_minor, call.currency ?? currency)}</dd>
        {latency.length > 0 && (
          <>
            <dt>Latency</dt>
            <dd>{latency.join(", ")}</dd>
          </>
        )}
        {(call.provider_failures ?? []).length > 0 && (
          <>
            <dt>Speech vendors</dt>
            <dd data-testid="provider-failures">
              {(call.provider_failures ?? []).map((f) => (
                <p key={`${f.stage}-${f.at}`} title={f.message}>
                  {f.stage === "synthesis" ? "The voice" : "The recogniser"} ({f.provider}) failed at{" "}
                  {new Date(f.at).toLocaleTimeString()}: the offline {f.stage === "synthesis" ? "voice" : "one"} took
                  over.
                </p>
              ))}
            </dd>
          </>
        )}
      </dl>
      {call.recording && (
        <section aria-label="Recording">
          <h3>Recording</h3>
          {/* biome-ignore lint/a11y/useMediaCaption: the transcript beside it is the call's words */}
          <audio
            controls
            preload="metadata"
            src={call.recording.url}
            data-testid="recording"
            onTimeUpdate={(e) => setHeard(turnAt(call, e.currentTarget.currentTime * 1000))}
          />
          <p class="hint">Kept until {new Date(call.recording.expires_at).toLocaleDateString()}.</p>
        </section>
      )}
      <section aria-label="Transcript">
        <h3>Transcript</h3>
        {call.transcript.length === 0 ? (
          <p class="muted">Nothing was said: the call did not connect.</p>
        ) : (
          <ol class="transcript" aria-label="Turns" ref={turns}>
            {call.transcript.map((t, i) => (
              <li key={t.seq} class={i === heard ? `${t.speaker} playing` : t.speaker} aria-current={i === heard}>
                <span class="speaker">{SPEAKERS[t.speaker] ?? t.speaker}</span>
                {t.text}
                {t.interrupted && <span class="hint"> (cut off: the callee spoke over this)</span>}
                {t.latency_ms !== undefined && (
                  <span class="hint" title={stageWords(t.latency_ms)}>
                    {" "}
                    · replied in {t.latency_ms.total} ms
                  </span>
                )}
              </li>
            ))}
          </ol>
        )}
        {call.transcript_truncated && <p class="hint">Only the first 1,000 turns are shown.</p>}
      </section>
      <section aria-label="Analysis">
        <h3>Analysis</h3>
        {a === null ? (
          <p class="muted">No analysis: the call did not connect, or analysis is off for this campaign.</p>
        ) : a.status !== "done" ? (
          <p class="muted">{analysisStatusWords(a.status)}</p>
        ) : (
          <dl class="kv">
            <dt>Summary</dt>
            <dd>{a.summary ?? "—"}</dd>
            <dt>Goal met</dt>
            <dd>{a.goal_met === null ? "—" : a.goal_met ? "Yes" : "No"}</dd>
            <dt>Sentiment</dt>
            <dd>{sentimentWords(a.sentiment)}</dd>
            {a.agreed_value_minor !== null && (
              <>
                <dt>Agreed value</dt>
                <dd>{money(a.agreed_value_minor, call.currency ?? currency)}</dd>
              </>
            )}
            {a.callback_at !== null && (
              <>
                <dt>Call back</dt>
                <dd>{new Date(a.callback_at).toLocaleString()}</dd>
              </>
            )}
            {Object.entries(a.fields).map(([name, value]) => (
              <Fragment key={name}>
                <dt>{spaced(name)}</dt>
                <dd>
                  {value === null || value === undefined
                    ? "—"
                    : typeof value === "boolean"
                      ? value
                        ? "yes"
                        : "no"
                      : String(value)}
                </dd>
              </Fragment>
            ))}
          </dl>
        )}
      </section>
    </>
  )
}
