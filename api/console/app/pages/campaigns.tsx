// Campaigns: the workspace's workflows by status; create one from a prompt (the generated rule
// book shown readably, validation errors beside the prompt); and for the chosen one, edit its name,
// persona, voice and schedule, upload an audience CSV, attest consent, hear the opening line, and
// run, pause or retire it; its runs, each run's results (outcome and analysis per target) and
// their CSV. Each action shows only to a role that may take it: setting up and running need write,
// pausing supervise (a supervisor may stop a campaign going wrong), retiring admin.
import { useEffect, useRef, useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { ApiError, blobUrl, request, upload } from "../api.js"
import { Button, ErrorText, Field, useLoad } from "../ui.js"
import { RunResults } from "./run-results.js"

type Status = "draft" | "live" | "paused" | "retired"

interface WorkflowSummary {
  readonly id: number
  readonly name: string
  readonly status: Status
  readonly persona: string
  readonly schedule_kind: string
  readonly updated_at: string
}

interface Schedule {
  readonly calling_hours?: { readonly start: string; readonly end: string }
  readonly timezone?: string
  readonly days?: ReadonlyArray<string>
  readonly start_at?: string
}

interface Workflow extends WorkflowSummary {
  readonly schedule: Schedule
  readonly rule_book: Record<string, unknown>
  readonly rule_book_version?: number
  readonly audience_count: number
  readonly runs_count: number
  readonly compliance: { readonly attested: boolean; readonly consent_attested_at: string | null }
}

interface Voice {
  readonly id: string
  readonly name: string
  readonly accent: string
}

interface ClonedVoice {
  readonly id: number
  readonly name: string
  /** The workflows it speaks for. */
  readonly workflow_ids?: ReadonlyArray<number>
}

interface AudienceCounts {
  readonly accepted: number
  readonly rejected_dnc: number
  readonly rejected_ncpr: number
  readonly rejected_cooldown: number
  readonly rejected_erased: number
  readonly rejected_invalid: number
  readonly duplicates: number
  readonly total_targets: number
  readonly invalid_rows: ReadonlyArray<{ readonly line: number; readonly phone: string; readonly reason: string }>
}

const GROUPS: ReadonlyArray<{ readonly status: Status; readonly title: string }> = [
  { status: "live", title: "Live" },
  { status: "paused", title: "Paused" },
  { status: "draft", title: "Drafts" },
  { status: "retired", title: "Retired" },
]

const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] as const

export function CampaignsPage() {
  const list = useLoad(() => request<{ workflows: WorkflowSummary[] }>("GET", "/api/workflows?limit=200"))
  const [selected, setSelected] = useState<number | undefined>(undefined)
  const { can } = useAccess()
  const workflows = list.data?.workflows ?? []

  return (
    <section aria-labelledby="campaigns-h">
      <h1 id="campaigns-h">Campaigns</h1>
      {can("write") ? (
        <CreateWorkflow
          onCreated={(id) => {
            setSelected(id)
            list.reload()
          }}
        />
      ) : (
        <p class="muted">Owners and admins create and change campaigns; you can follow them and their results here.</p>
      )}
      <ErrorText error={list.error} />
      <div class="cards">
        {GROUPS.map((g) => {
          const items = workflows.filter((w) => w.status === g.status)
          return (
            <section key={g.status} class="panel" aria-labelledby={`group-${g.status}`}>
              <h2 id={`group-${g.status}`}>
                {g.title} <span class="muted">({items.length})</span>
              </h2>
              {items.length === 0 ? (
                <p class="muted">None.</p>
              ) : (
                <ul class="plain">
                  {items.map((w) => (
                    <li key={w.id}>
                      <Button aria-current={w.id === selected ? "true" : undefined} onClick={() => setSelected(w.id)}>
                        {w.name}
                      </Button>
                    </li>
                  ))}
                </ul>
              )}
            </section>
          )
        })}
      </div>
      {selected !== undefined && <WorkflowDetail key={selected} id={selected} onChanged={list.reload} />}
    </section>
  )
}

function CreateWorkflow({ onCreated }: { readonly onCreated: (id: number) => void }) {
  const [prompt, setPrompt] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)

  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const w = await request<{ id: number }>("POST", "/api/workflows", { nl_prompt: prompt })
      setPrompt("")
      onCreated(w.id)
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const invalid = error instanceof ApiError && error.code === "RULE_BOOK_INVALID" ? error : undefined
  const promptError = error instanceof ApiError ? error.fieldError("nl_prompt") : undefined

  return (
    <form class="panel" onSubmit={submit} noValidate aria-labelledby="create-h">
      <h2 id="create-h">New workflow</h2>
      <Field
        label="Prompt"
        error={promptError}
        hint="Describe the campaign in plain words: who to call, why, what the agent may offer."
      >
        {(id, d) => (
          <textarea
            id={id}
            aria-describedby={d}
            maxLength={4000}
            value={prompt}
            onInput={(e) => setPrompt(e.currentTarget.value)}
          />
        )}
      </Field>
      {invalid ? (
        <div role="alert">
          <p class="error">The generated rule book did not pass validation; nothing was created. Adjust the prompt:</p>
          <ul class="error">
            {invalid.errors.map((x) => (
              <li key={`${x.field}:${x.message}`}>
                <code>{x.field}</code>: {x.message}
              </li>
            ))}
          </ul>
        </div>
      ) : (
        !promptError && <ErrorText error={error} />
      )}
      <div class="actions">
        <Button type="submit" kind="primary" busy={busy}>
          Create workflow
        </Button>
      </div>
    </form>
  )
}

function WorkflowDetail({ id, onChanged }: { readonly id: number; readonly onChanged: () => void }) {
  const wf = useLoad(() => request<Workflow>("GET", `/api/workflows/${id}`), [id])
  const [actionError, setActionError] = useState<unknown>(undefined)
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState<string | undefined>(undefined)
  const [confirmRetire, setConfirmRetire] = useState(false)
  const { can } = useAccess()
  const heading = useRef<HTMLHeadingElement>(null)
  const loaded = wf.data !== undefined
  // The chosen workflow opens below the lists: take the focus (and the view) there once it loads.
  useEffect(() => {
    if (loaded) heading.current?.focus()
  }, [loaded])

  const w = wf.data
  if (wf.error) return <ErrorText error={wf.error} />
  if (w === undefined) return <p>Loading…</p>

  const refresh = () => {
    wf.reload()
    onChanged()
  }
  const act = async (name: string, path: string, done: (r: Record<string, unknown>) => string) => {
    setBusy(name)
    setActionError(undefined)
    setNotice(undefined)
    try {
      setNotice(done(await request<Record<string, unknown>>("POST", path)))
      refresh()
    } catch (e) {
      setActionError(e)
    } finally {
      setBusy(undefined)
      setConfirmRetire(false)
    }
  }

  return (
    <article class="panel" aria-labelledby="wf-h">
      <h2 id="wf-h" ref={heading} tabIndex={-1}>
        {w.name} <span class={`badge badge-${w.status}`}>{w.status}</span>
      </h2>
      <dl class="kv">
        <dt>Persona</dt>
        <dd>{w.persona}</dd>
        <dt>Schedule</dt>
        <dd>{scheduleText(w)}</dd>
        <dt>Audience</dt>
        <dd>{w.audience_count} people</dd>
        <dt>Runs</dt>
        <dd>{w.runs_count}</dd>
        <dt>Consent</dt>
        <dd>
          {w.compliance.attested
            ? `attested ${new Date(w.compliance.consent_attested_at!).toLocaleString()}`
            : "not attested"}
        </dd>
      </dl>

      {can("supervise") && (
        <div class="actions">
          {can("write") && (
            <Button
              kind="primary"
              busy={busy === "run"}
              disabled={w.status === "retired" || w.status === "live"}
              onClick={() =>
                act("run", `/api/workflows/${id}/run`, (r) =>
                  r["resumed"]
                    ? `Run ${r["run_id"]} resumed.`
                    : `Run ${r["run_id"]} started: ${r["targets_queued"]} queued.`,
                )
              }
            >
              Run
            </Button>
          )}
          {can("supervise") && (
            <Button
              busy={busy === "pause"}
              disabled={w.status !== "live"}
              onClick={() => act("pause", `/api/workflows/${id}/pause`, () => "Paused: calls in flight will finish.")}
            >
              Pause
            </Button>
          )}
          {!can("admin") ? null : confirmRetire ? (
            <>
              <span>Retiring cannot be undone.</span>
              <Button
                kind="danger"
                busy={busy === "retire"}
                onClick={() => act("retire", `/api/workflows/${id}/retire`, () => "Retired.")}
              >
                Yes, retire
              </Button>
              <Button onClick={() => setConfirmRetire(false)}>Keep it</Button>
            </>
          ) : (
            <Button kind="danger" disabled={w.status === "retired"} onClick={() => setConfirmRetire(true)}>
              Retire
            </Button>
          )}
        </div>
      )}
      {notice && (
        <p class="ok" role="status">
          {notice}
        </p>
      )}
      <ActionError error={actionError} />

      {/* Keyed by status and run count: starting, pausing or ending a run lists it afresh. */}
      <RunResults key={`${w.status}-${w.runs_count}`} workflowId={id} />

      <h3>Rule book{w.rule_book_version ? ` (version ${w.rule_book_version})` : ""}</h3>
      <RuleBook book={w.rule_book} />

      <PreviewOpening workflow={w} />
      {w.status !== "retired" && can("write") && (
        <>
          {/* Not keyed by updated_at: attesting or pausing bumps it, and a remount would throw away
              the operator's unsaved edits, the "Saved." note and the focus. */}
          <EditWorkflow workflow={w} onSaved={refresh} />
          <AudienceUpload id={id} onUploaded={refresh} />
          <Attest id={id} attested={w.compliance.attested} onAttested={refresh} />
        </>
      )}
    </article>
  )
}

/** An action's refusal in words, with what a not-ready workflow still lacks. */
function ActionError({ error }: { readonly error: unknown }) {
  if (!(error instanceof ApiError)) return <ErrorText error={error} />
  return (
    <div role="alert">
      <p class="error">{error.message}</p>
      {error.errors.length > 0 && (
        <ul class="error">
          {error.errors.map((x) => (
            <li key={x.field}>{x.message}</li>
          ))}
        </ul>
      )}
    </div>
  )
}

function scheduleText(w: Workflow): string {
  const s = w.schedule
  const hours = s.calling_hours ? `${s.calling_hours.start}–${s.calling_hours.end}` : ""
  const days = s.days && s.days.length < DAYS.length ? s.days.join(", ") : "every day"
  const zone = s.timezone ? ` (${s.timezone})` : " (callee's local time)"
  const from = s.start_at ? `, from ${new Date(s.start_at).toLocaleString()}` : ""
  return `${w.schedule_kind}: ${days}, ${hours}${zone}${from}`
}

const label = (key: string) => key.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase())

/** The rule book as a definition list: text as text, lists as lists, objects nested. */
function RuleBook({ book }: { readonly book: Record<string, unknown> }) {
  return (
    <dl class="kv">
      {Object.entries(book).map(([k, v]) => (
        <RuleEntry key={k} name={k} value={v} />
      ))}
    </dl>
  )
}

function RuleEntry({ name, value }: { readonly name: string; readonly value: unknown }) {
  return (
    <>
      <dt>{label(name)}</dt>
      <dd>
        <RuleValue value={value} />
      </dd>
    </>
  )
}

function RuleValue({ value }: { readonly value: unknown }) {
  if (value === null || value === undefined) return <span class="muted">none</span>
  if (typeof value === "boolean") return <>{value ? "yes" : "no"}</>
  if (typeof value !== "object") return <span class="prewrap">{String(value)}</span>
  if (Array.isArray(value)) {
    if (value.length === 0) return <span class="muted">none</span>
    return (
      <ul>
        {value.map((v, i) => (
          <li key={i}>
            <RuleValue value={v} />
          </li>
        ))}
      </ul>
    )
  }
  return <RuleBook book={value as Record<string, unknown>} />
}

function PreviewOpening({ workflow }: { readonly workflow: Workflow }) {
  const [src, setSrc] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const line = typeof workflow.rule_book["opening_line"] === "string" ? workflow.rule_book["opening_line"] : ""
  // A blob: URL holds the clip in memory until revoked.
  useEffect(() => () => src && URL.revokeObjectURL(src), [src])
  if (line === "") return null

  const preview = async () => {
    setBusy(true)
    setError(undefined)
    try {
      const clip = await request<{ mp3_url: string }>("POST", "/api/workflows/preview-opening", {
        text: line,
        workflow_id: workflow.id,
      })
      // mp3_url may be absolute (PUBLIC_BASE_URL); the page fetches it on its own origin.
      setSrc(await blobUrl(new URL(clip.mp3_url, location.href).pathname))
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <section aria-labelledby="preview-h">
      <h3 id="preview-h">Opening line</h3>
      <p class="prewrap">“{line}”</p>
      <div class="actions">
        <Button busy={busy} onClick={preview}>
          Preview opening
        </Button>
      </div>
      {src && (
        // biome-ignore lint/a11y/useMediaCaption: a synthesised clip of the line printed just above
        <audio controls src={src} aria-label="Opening line preview" />
      )}
      <ErrorText error={error} />
    </section>
  )
}

/** The settings form's fields as the workflow holds them. */
function settingsOf(w: Workflow) {
  const s = w.schedule
  return {
    name: w.name,
    persona: w.persona,
    kind: w.schedule_kind,
    start: s.calling_hours?.start ?? "09:00",
    end: s.calling_hours?.end ?? "21:00",
    timezone: s.timezone ?? "",
    days: s.days ?? (DAYS as ReadonlyArray<string>),
    startAt: s.start_at ? toLocalInput(s.start_at) : "",
  }
}

function EditWorkflow({ workflow, onSaved }: { readonly workflow: Workflow; readonly onSaved: () => void }) {
  const voices = useLoad(() => request<{ voices: Voice[] }>("GET", "/voices"))
  const cloned = useLoad(() => request<{ voices: ClonedVoice[] }>("GET", "/api/voice-avatars"))
  const [form, setForm] = useState(() => settingsOf(workflow))
  const set = (patch: Partial<ReturnType<typeof settingsOf>>) => setForm((f) => ({ ...f, ...patch }))
  const { name, persona, kind, start, end, timezone, days, startAt } = form
  // The voice the workflow speaks with now (the API lists each clone's workflows); "" until changed here.
  const assigned = cloned.data?.voices.find((v) => v.workflow_ids?.includes(workflow.id))
  const currentVoice = assigned ? String(assigned.id) : "persona"
  const [voice, setVoice] = useState("")
  const shownVoice = voice === "" ? currentVoice : voice
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [saved, setSaved] = useState(false)
  const err = (f: string) => (error instanceof ApiError ? error.fieldError(f) : undefined)

  const save = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    setSaved(false)
    try {
      const schedule: Record<string, unknown> = { calling_hours: { start, end } }
      if (timezone.trim() !== "") schedule["timezone"] = timezone.trim()
      if (days.length > 0) schedule["days"] = DAYS.filter((d) => days.includes(d))
      if (kind === "once" && startAt !== "") schedule["start_at"] = new Date(startAt).toISOString()
      // The persona lives in the rule book: sending it unchanged would store a new rule-book version
      // (and reset the book's language) on every save of the schedule.
      const body: Record<string, unknown> = { name, schedule_kind: kind, schedule }
      if (persona !== workflow.persona) body["persona"] = persona
      const updated = await request<Workflow>("PUT", `/api/workflows/${workflow.id}`, body)
      // The form now shows what the API stored (a name trimmed, a schedule normalised).
      setForm(settingsOf(updated))
      if (voice !== "" && voice !== currentVoice) {
        await request("PUT", "/api/voice-avatars/assign", {
          workflow_id: workflow.id,
          voice_id: voice === "persona" ? null : Number(voice),
        })
        cloned.reload()
      }
      setSaved(true)
      onSaved()
    } catch (e2) {
      setError(e2)
    } finally {
      setBusy(false)
    }
  }
  const toggleDay = (d: string) => set({ days: days.includes(d) ? days.filter((x) => x !== d) : [...days, d] })

  return (
    <form onSubmit={save} noValidate aria-labelledby="edit-h">
      <h3 id="edit-h">Workflow settings</h3>
      {workflow.status === "live" && <p class="hint">A live workflow must be paused before it can be changed.</p>}
      <Field label="Name" error={err("name")}>
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            maxLength={200}
            value={name}
            onInput={(e) => set({ name: e.currentTarget.value })}
          />
        )}
      </Field>
      <Field label="Persona" error={err("persona")}>
        {(id, d) => (
          <select
            id={id}
            aria-describedby={d}
            value={persona}
            onChange={(e) => set({ persona: e.currentTarget.value })}
          >
            {(voices.data?.voices ?? [{ id: persona, name: persona, accent: "" }]).map((v) => (
              <option key={v.id} value={v.id}>
                {v.name}
                {v.accent ? ` (${v.accent})` : ""}
              </option>
            ))}
          </select>
        )}
      </Field>
      {(cloned.data?.voices.length ?? 0) > 0 && (
        <Field label="Voice" hint="A cloned voice speaks instead of the persona's own.">
          {(id, d) => (
            <select id={id} aria-describedby={d} value={shownVoice} onChange={(e) => setVoice(e.currentTarget.value)}>
              <option value="persona">The persona's own voice</option>
              {cloned.data!.voices.map((v) => (
                <option key={v.id} value={String(v.id)}>
                  {v.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <Field label="Schedule" error={err("schedule_kind")}>
        {(id, d) => (
          <select id={id} aria-describedby={d} value={kind} onChange={(e) => set({ kind: e.currentTarget.value })}>
            <option value="immediate">Immediately, inside the calling hours</option>
            <option value="window">Only on the chosen days, inside the calling hours</option>
            <option value="once">Not before a start time</option>
          </select>
        )}
      </Field>
      <fieldset>
        <legend>Calling hours (callee's local time)</legend>
        <Field label="From" error={err("schedule.calling_hours.start")}>
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="time"
              value={start}
              onInput={(e) => set({ start: e.currentTarget.value })}
            />
          )}
        </Field>
        <Field label="Until" error={err("schedule.calling_hours.end")}>
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="time"
              value={end}
              onInput={(e) => set({ end: e.currentTarget.value })}
            />
          )}
        </Field>
        <Field label="Time zone" error={err("schedule.timezone")} hint="For numbers that give none, e.g. Asia/Kolkata.">
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              maxLength={64}
              value={timezone}
              onInput={(e) => set({ timezone: e.currentTarget.value })}
            />
          )}
        </Field>
      </fieldset>
      <fieldset>
        <legend>Days</legend>
        <div class="actions">
          {DAYS.map((d) => (
            <label key={d} class="check">
              <input type="checkbox" checked={days.includes(d)} onChange={() => toggleDay(d)} /> {d}
            </label>
          ))}
        </div>
      </fieldset>
      {kind === "once" && (
        <Field label="Start at" error={err("schedule.start_at")}>
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="datetime-local"
              value={startAt}
              onInput={(e) => set({ startAt: e.currentTarget.value })}
            />
          )}
        </Field>
      )}
      <ErrorText error={error instanceof ApiError && error.errors.length > 0 ? undefined : error} />
      {error instanceof ApiError && error.errors.length > 0 && (
        <p class="error" role="alert">
          {error.errors.map((x) => `${x.field}: ${x.message}`).join("; ")}
        </p>
      )}
      {saved && (
        <p class="ok" role="status">
          Saved.
        </p>
      )}
      <div class="actions">
        <Button type="submit" kind="primary" busy={busy}>
          Save changes
        </Button>
      </div>
    </form>
  )
}

/** An ISO timestamp as a datetime-local input's value, in the browser's time zone. */
function toLocalInput(iso: string): string {
  const d = new Date(iso)
  const pad = (n: number) => String(n).padStart(2, "0")
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`
}

function AudienceUpload({ id, onUploaded }: { readonly id: number; readonly onUploaded: () => void }) {
  const [file, setFile] = useState<File | undefined>(undefined)
  const [progress, setProgress] = useState<number | undefined>(undefined)
  const [counts, setCounts] = useState<AudienceCounts | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)

  const send = async (e: Event) => {
    e.preventDefault()
    if (file === undefined) return setError("Choose a CSV file first.")
    setError(undefined)
    setCounts(undefined)
    setProgress(0)
    const form = new FormData()
    form.append("file", file, file.name)
    try {
      setCounts(await upload<AudienceCounts>(`/api/workflows/${id}/audience`, form, setProgress))
      onUploaded()
    } catch (err) {
      setError(err)
    } finally {
      setProgress(undefined)
    }
  }
  const rejected = counts
    ? counts.rejected_dnc +
      counts.rejected_ncpr +
      counts.rejected_cooldown +
      counts.rejected_erased +
      counts.rejected_invalid
    : 0

  return (
    <form onSubmit={send} noValidate aria-labelledby="audience-h">
      <h3 id="audience-h">Audience</h3>
      <Field label="Audience CSV" hint="A header row with a phone column; name and other columns are kept.">
        {(fid, d) => (
          <input
            id={fid}
            aria-describedby={d}
            type="file"
            accept=".csv,text/csv"
            onChange={(e) => setFile(e.currentTarget.files?.[0])}
          />
        )}
      </Field>
      {progress !== undefined && (
        <progress max={1} value={progress} aria-label="Upload progress">
          {Math.round(progress * 100)}%
        </progress>
      )}
      <div class="actions">
        <Button type="submit" kind="primary" busy={progress !== undefined}>
          Upload audience
        </Button>
      </div>
      <ErrorText error={error} />
      {counts && (
        <div role="status">
          <p class="ok">
            Accepted {counts.accepted}, rejected {rejected}
            {counts.duplicates > 0 ? `, ${counts.duplicates} duplicates skipped` : ""}. The audience now has{" "}
            {counts.total_targets} people.
          </p>
          <dl class="kv">
            <dt>Accepted</dt>
            <dd>{counts.accepted}</dd>
            <dt>Rejected: do-not-call</dt>
            <dd>{counts.rejected_dnc + counts.rejected_ncpr}</dd>
            <dt>Rejected: called recently</dt>
            <dd>{counts.rejected_cooldown}</dd>
            <dt>Rejected: erased</dt>
            <dd>{counts.rejected_erased}</dd>
            <dt>Rejected: invalid</dt>
            <dd>{counts.rejected_invalid}</dd>
          </dl>
          {counts.invalid_rows.length > 0 && (
            <ul class="hint">
              {counts.invalid_rows.slice(0, 20).map((r) => (
                <li key={r.line}>
                  Line {r.line}: {r.phone} — {r.reason}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </form>
  )
}

const DEFAULT_ATTESTATION =
  "Everyone in this audience has given consent to be called about this campaign, and we keep records of it."

function Attest({
  id,
  attested,
  onAttested,
}: {
  readonly id: number
  readonly attested: boolean
  readonly onAttested: () => void
}) {
  const [text, setText] = useState(DEFAULT_ATTESTATION)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)

  const send = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      await request("PUT", `/api/workflows/${id}/compliance`, { consent_attestation_text: text })
      onAttested()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  // An error naming the statement is shown beside it; any other (another field, or none) below.
  const statementError = error instanceof ApiError ? error.fieldError("consent_attestation_text") : undefined
  return (
    <form onSubmit={send} noValidate aria-labelledby="consent-h">
      <h3 id="consent-h">Consent</h3>
      {attested && <p class="ok">Consent is attested. Attesting again replaces the statement.</p>}
      <Field label="Consent statement" error={statementError}>
        {(fid, d) => (
          <textarea
            id={fid}
            aria-describedby={d}
            maxLength={2000}
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
          />
        )}
      </Field>
      <ErrorText error={statementError === undefined ? error : undefined} />
      <div class="actions">
        <Button type="submit" busy={busy}>
          Attest consent
        </Button>
      </div>
    </form>
  )
}
