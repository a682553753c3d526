// Campaigns: the workspace's workflows by status, found by name and status; create one from a
// prompt (validation errors beside it); the chosen one's Run, Pause and Retire above its sections:
// Overview (its facts and runs), Audience (upload a CSV), Rule book (readable, the opening line edited
// and previewed as edited), Consent (an empty statement and an explicit confirmation), Settings
// (name, persona, voice, schedule), Results (each run's results per target, the call drawer,
// CSV) and Analytics (funnel, outcomes, connect rate by hour, experiments; ./analytics.tsx). Each
// action shows only to a role that may take it: setting up and running need write, pausing supervise
// (a supervisor may stop a campaign going wrong), retiring admin.
import { Fragment } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { ApiError, blobUrl, request, upload } from "../api.js"
import { Button, ErrorText, Field, money, Tabs, useLoad } from "../ui.js"
import {
  blockedWords,
  fieldWords,
  invalidPhoneWords,
  listWords,
  missingWords,
  scheduleKindWords,
  spaced,
  voicemailWords,
  workflowStatusWords,
} from "../words.js"
import { CampaignAnalytics } from "./analytics.js"
import { CampaignOverview } from "./campaign-overview.js"
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
  readonly compliance: {
    readonly attested: boolean
    readonly consent_attestation_text: string | null
    readonly consent_attested_by_user_id: number | null
    readonly consent_attested_at: string | null
  }
  /** Whether it may run, and what it still lacks (GET /api/workflows/{id}). */
  readonly readiness?: {
    readonly ready: boolean
    readonly missing: ReadonlyArray<string>
    readonly blocked_by: string | null
    readonly can_run: boolean
  }
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

/** The status filter's choices. */
const FILTERS: ReadonlyArray<{ readonly value: "" | Status; readonly label: string }> = [
  { value: "", label: "Every status" },
  ...GROUPS.map((g) => ({ value: g.status, label: g.title })),
]

export function CampaignsPage() {
  const list = useLoad(() => request<{ workflows: WorkflowSummary[] }>("GET", "/api/workflows?limit=200"))
  const [selected, setSelected] = useState<number | undefined>(undefined)
  const [search, setSearch] = useState("")
  const [status, setStatus] = useState<"" | Status>("")
  const { can } = useAccess()
  const workflows = list.data?.workflows ?? []
  const needle = search.trim().toLowerCase()
  const matching = workflows.filter((w) => needle === "" || w.name.toLowerCase().includes(needle))
  const groups = GROUPS.filter((g) => status === "" || g.status === status)

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
      {workflows.length > 0 && (
        <div class="filters">
          <Field label="Search campaigns">
            {(id) => (
              <input
                id={id}
                type="search"
                maxLength={200}
                value={search}
                onInput={(e) => setSearch(e.currentTarget.value)}
              />
            )}
          </Field>
          <Field label="Status">
            {(id) => (
              <select id={id} value={status} onChange={(e) => setStatus(e.currentTarget.value as "" | Status)}>
                {FILTERS.map((f) => (
                  <option key={f.value} value={f.value}>
                    {f.label}
                  </option>
                ))}
              </select>
            )}
          </Field>
        </div>
      )}
      <div class="cards">
        {groups.map((g) => {
          const items = matching.filter((w) => w.status === g.status)
          return (
            <section key={g.status} class="panel" aria-labelledby={`group-${g.status}`}>
              <h2 id={`group-${g.status}`}>
                {g.title} <span class="muted">({items.length})</span>
              </h2>
              {items.length === 0 ? (
                <p class="muted">{needle === "" ? "None." : "None match."}</p>
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
                {fieldWords(x.field)}: {x.message}
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

const TABS = [
  { id: "overview", title: "Overview" },
  { id: "audience", title: "Audience" },
  { id: "rulebook", title: "Rule book" },
  { id: "consent", title: "Consent" },
  { id: "settings", title: "Settings" },
  { id: "results", title: "Results" },
  { id: "analytics", title: "Analytics" },
] as const
type TabId = (typeof TABS)[number]["id"]

function WorkflowDetail({ id, onChanged }: { readonly id: number; readonly onChanged: () => void }) {
  const wf = useLoad(() => request<Workflow>("GET", `/api/workflows/${id}`), [id])
  const voices = useLoad(() => request<{ voices: Voice[] }>("GET", "/voices"))
  const [actionError, setActionError] = useState<unknown>(undefined)
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState<string | undefined>(undefined)
  const [confirmRetire, setConfirmRetire] = useState(false)
  const [tab, setTab] = useState<TabId>("overview")
  const { can } = useAccess()
  const heading = useRef<HTMLHeadingElement>(null)
  const loaded = wf.data !== undefined
  // The chosen workflow opens below the lists: take the focus (and the view) there once it loads.
  useEffect(() => {
    if (loaded) heading.current?.focus()
  }, [loaded])
  // Readiness is read again whenever the page comes back into view (an email verified in another tab).
  const reloadRef = useRef(wf.reload)
  reloadRef.current = wf.reload
  useEffect(() => {
    const on = () => reloadRef.current()
    addEventListener("focus", on)
    return () => removeEventListener("focus", on)
  }, [])

  const w = wf.data
  if (wf.error) return <ErrorText error={wf.error} />
  if (w === undefined) return <p>Loading…</p>

  // Every change reads the workflow again (its readiness with it), and a refusal it fixed goes.
  const refresh = () => {
    wf.reload()
    onChanged()
    setActionError(undefined)
  }
  const act = async (name: string, path: string, done: (r: Record<string, unknown>) => string) => {
    setBusy(name)
    setActionError(undefined)
    setNotice(undefined)
    try {
      setNotice(done(await request<Record<string, unknown>>("POST", path)))
      wf.reload()
      onChanged()
    } catch (e) {
      setActionError(e)
      wf.reload()
    } finally {
      setBusy(undefined)
      setConfirmRetire(false)
    }
  }
  const voice = voices.data?.voices.find((v) => v.id === w.persona)
  const missing = w.readiness?.missing ?? []
  // A refusal for what the workflow lacked is not kept: the readiness line says what it lacks now.
  const shownError =
    actionError instanceof ApiError && actionError.code === "WORKFLOW_NOT_READY" ? undefined : actionError
  const edit = w.status !== "retired" && can("write")

  return (
    <article class="panel" aria-labelledby="wf-h">
      <h2 id="wf-h" ref={heading} tabIndex={-1}>
        {w.name} <span class={`badge badge-${w.status}`}>{workflowStatusWords(w.status)}</span>
      </h2>
      {can("supervise") && (
        <div class="actions">
          {can("write") && (
            <Button
              kind="primary"
              busy={busy === "run"}
              disabled={
                w.status === "retired" || (w.readiness === undefined ? w.status === "live" : !w.readiness.can_run)
              }
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
      {w.status !== "retired" && missing.length > 0 && (
        <p class="hint" data-testid="readiness">
          Not ready to run yet. It still needs {listWords(missing.map((m) => missingWords(m)))}.
        </p>
      )}
      {w.status !== "retired" && w.readiness?.blocked_by === "run_in_progress" && can("write") && (
        <p class="hint" data-testid="run-blocked">
          {blockedWords("run_in_progress")} Run is off until it finishes (Pause stops it; Run then resumes it).
        </p>
      )}
      {notice && (
        <p class="ok" role="status">
          {notice}
        </p>
      )}
      <ActionError error={shownError} />

      <Tabs
        label="Campaign sections"
        selected={tab}
        onSelect={(t) => setTab(t as TabId)}
        tabs={TABS.map((t) => ({
          ...t,
          panel:
            t.id === "overview" ? (
              <>
                <dl class="kv">
                  <dt>Voice</dt>
                  <dd>{voice ? `${voice.name} (${voice.accent})` : w.persona}</dd>
                  <dt>Schedule</dt>
                  <dd>{scheduleText(w)}</dd>
                  <dt>Audience</dt>
                  <dd>
                    {w.audience_count} {w.audience_count === 1 ? "person" : "people"}
                  </dd>
                  <dt>Runs</dt>
                  <dd>{w.runs_count}</dd>
                  <dt>Consent</dt>
                  <dd>
                    {w.compliance.attested
                      ? `attested ${new Date(w.compliance.consent_attested_at!).toLocaleString()}`
                      : "not attested"}
                  </dd>
                </dl>
                {/* Keyed by status and run count: starting, pausing or ending a run lists it afresh. */}
                <CampaignOverview
                  key={`${w.status}-${w.runs_count}`}
                  workflowId={id}
                  onRunEnded={() => {
                    // "Run … started" no longer holds; the campaign (its readiness, Run) is read again.
                    setNotice(undefined)
                    wf.reload()
                  }}
                />
              </>
            ) : t.id === "audience" ? (
              <>
                <p>
                  {w.audience_count === 0
                    ? "No one to call yet."
                    : `${w.audience_count} ${w.audience_count === 1 ? "person" : "people"} to call.`}
                </p>
                {edit ? (
                  <AudienceUpload id={id} onUploaded={refresh} />
                ) : (
                  <p class="muted">Owners and admins upload the audience.</p>
                )}
              </>
            ) : t.id === "rulebook" ? (
              <>
                <OpeningLine workflow={w} voice={voice} edit={edit} onSaved={refresh} />
                <RuleBookView workflow={w} voice={voice} />
              </>
            ) : t.id === "consent" ? (
              <Consent workflow={w} edit={edit} onAttested={refresh} />
            ) : t.id === "settings" ? (
              edit ? (
                // Not keyed by updated_at: attesting or pausing bumps it, and a remount would throw away
                // the operator's unsaved edits, the "Saved." note and the focus.
                <EditWorkflow workflow={w} onSaved={refresh} />
              ) : (
                <p class="muted">
                  {w.status === "retired"
                    ? "A retired campaign cannot be changed."
                    : "Owners and admins change a campaign's settings."}
                </p>
              )
            ) : t.id === "results" ? (
              <RunResults key={`${w.status}-${w.runs_count}`} workflowId={id} />
            ) : (
              // Read only once opened (and afresh each time): its queries cover every call in a range.
              tab === "analytics" && <CampaignAnalytics workflowId={id} />
            ),
        }))}
      />
    </article>
  )
}

/** An action's refusal in words, with each field's problem when the API named them. */
function ActionError({ error }: { readonly error: unknown }) {
  if (!(error instanceof ApiError)) return <ErrorText error={error} />
  return (
    <div role="alert">
      <p class="error">{error.message}</p>
    </div>
  )
}

function scheduleText(w: Workflow): string {
  const s = w.schedule
  const hours = s.calling_hours ? `${s.calling_hours.start}–${s.calling_hours.end}` : ""
  const days =
    s.days && s.days.length < DAYS.length
      ? s.days.map((d) => d.charAt(0).toUpperCase() + d.slice(1)).join(", ")
      : "every day"
  const zone = s.timezone ? ` (${s.timezone})` : " (the callee's local time)"
  const from = s.start_at ? `, from ${new Date(s.start_at).toLocaleString()}` : ""
  return `${scheduleKindWords(w.schedule_kind)}: ${days}, ${hours}${zone}${from}`
}

/** Rule-book languages as people say them. */
const LANGUAGES: Readonly<Record<string, string>> = {
  "en-US": "English (American)",
  "en-GB": "English (British)",
  "en-IN": "English (Indian)",
  "en-AU": "English (Australian)",
  "hi-IN": "Hindi",
}

interface RuleBookShape {
  readonly goal?: string
  readonly language?: string
  readonly system_prompt?: string
  readonly opening_line?: string
  readonly disclosure_lines?: ReadonlyArray<string>
  readonly objection_handlers?: ReadonlyArray<{
    readonly category: string
    readonly trigger: string
    readonly response: string
  }>
  readonly concession_policy?: {
    readonly allowed: boolean
    readonly cap_minor: number
    readonly currency: string
    readonly requires_approval: boolean
  }
  readonly callback_policy?: {
    readonly allowed: boolean
    readonly max_days_ahead: number
    readonly requires_approval: boolean
  }
  readonly escalation_policy?: {
    readonly allowed: boolean
    readonly triggers: ReadonlyArray<string>
    readonly requires_approval: boolean
  }
  readonly voicemail?: string
  readonly max_call_seconds?: number
  readonly ncpr_category?: number | null
  readonly analysis?: {
    readonly enabled?: boolean
    readonly fields?: ReadonlyArray<{ readonly name: string; readonly description?: string }>
  }
}

const approval = (needed: boolean) => (needed ? " A supervisor approves each one first." : " No approval is needed.")

/** The rule book as a person reads it: what the agent is after, says, answers and may offer. */
function RuleBookView({ workflow, voice }: { readonly workflow: Workflow; readonly voice: Voice | undefined }) {
  const b = workflow.rule_book as RuleBookShape
  const c = b.concession_policy
  const cb = b.callback_policy
  const esc = b.escalation_policy
  const minutes = b.max_call_seconds === undefined ? undefined : Math.round(b.max_call_seconds / 60)
  return (
    <section aria-labelledby="rulebook-h">
      <h3 id="rulebook-h">Rule book{workflow.rule_book_version ? ` (version ${workflow.rule_book_version})` : ""}</h3>
      <div class="rulebook-section">
        <h4>Goal</h4>
        <p class="prewrap">{b.goal ?? "—"}</p>
      </div>
      <div class="rulebook-section">
        <h4>Language and voice</h4>
        <p>
          {LANGUAGES[b.language ?? ""] ?? b.language ?? "—"}, spoken by{" "}
          {voice ? `${voice.name} (${voice.accent})` : workflow.persona}.
        </p>
      </div>
      <div class="rulebook-section">
        <h4>Said at the start of every call</h4>
        {(b.disclosure_lines ?? []).length === 0 ? (
          <p class="muted">Nothing.</p>
        ) : (
          <ul>
            {(b.disclosure_lines ?? []).map((line, i) => (
              <li key={i} class="prewrap">
                “{line}”
              </li>
            ))}
          </ul>
        )}
      </div>
      <div class="rulebook-section">
        <h4>Objections and answers</h4>
        {(b.objection_handlers ?? []).length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <dl class="qa">
            {(b.objection_handlers ?? []).map((h, i) => (
              <Fragment key={i}>
                <dt>
                  If they say “{h.trigger}” <span class="muted">({spaced(h.category)})</span>
                </dt>
                <dd class="prewrap">the agent answers “{h.response}”</dd>
              </Fragment>
            ))}
          </dl>
        )}
      </div>
      <div class="rulebook-section">
        <h4>Discounts</h4>
        <p>
          {c?.allowed
            ? `The agent may offer up to ${money(c.cap_minor, c.currency)} off.${approval(c.requires_approval)}`
            : "The agent offers no discount."}
        </p>
      </div>
      <div class="rulebook-section">
        <h4>Calling back</h4>
        <p>
          {cb?.allowed
            ? `The agent may offer to call back, up to ${cb.max_days_ahead} day${cb.max_days_ahead === 1 ? "" : "s"} ahead.${approval(cb.requires_approval)}`
            : "The agent does not offer to call back."}
        </p>
      </div>
      <div class="rulebook-section">
        <h4>Passing the call to a person</h4>
        {esc?.allowed ? (
          <>
            <p>
              The agent may pass the call to a person
              {esc.requires_approval ? " (a supervisor approves each one first)" : ""} when:
            </p>
            <ul>
              {esc.triggers.map((t, i) => (
                <li key={i}>{t}</li>
              ))}
            </ul>
          </>
        ) : (
          <p>The agent does not pass calls to a person.</p>
        )}
      </div>
      <div class="rulebook-section">
        <h4>Voicemail and call length</h4>
        <p>
          On reaching voicemail: {voicemailWords(b.voicemail).toLowerCase()}.
          {minutes !== undefined && ` A call lasts at most ${minutes} minute${minutes === 1 ? "" : "s"}.`}
        </p>
        {b.ncpr_category !== undefined && b.ncpr_category !== null && (
          <p>India's do-not-call registry: calls are commercial category {b.ncpr_category}.</p>
        )}
      </div>
      {b.analysis?.enabled !== false && (b.analysis?.fields ?? []).length > 0 && (
        <div class="rulebook-section">
          <h4>Noted from each call</h4>
          <ul>
            {(b.analysis?.fields ?? []).map((f) => (
              <li key={f.name}>
                {spaced(f.name)}
                {f.description ? `: ${f.description}` : ""}
              </li>
            ))}
          </ul>
        </div>
      )}
      {b.system_prompt && (
        <details class="rulebook-section">
          <summary>The agent's full instructions</summary>
          <p class="prewrap">{b.system_prompt}</p>
        </details>
      )}
    </section>
  )
}

/** An example callee for the preview; a real call uses the audience's own names. */
const EXAMPLE_NAME = "Alex"

/** The line with its placeholders filled as one call would: {name}, {agent_name}, {company}. */
export function fillOpening(line: string, v: { name: string; agent: string; company: string }): string {
  return line.replace(/\{(name|agent_name|company)\}/g, (_, key: string) =>
    key === "name" ? v.name : key === "agent_name" ? v.agent : v.company,
  )
}

/** The opening line: edited and saved as the rule book's opening_line, previewed as edited. */
function OpeningLine({
  workflow,
  voice,
  edit,
  onSaved,
}: {
  readonly workflow: Workflow
  readonly voice: Voice | undefined
  readonly edit: boolean
  readonly onSaved: () => void
}) {
  const { me } = useAccess()
  const stored =
    typeof workflow.rule_book["opening_line"] === "string" ? (workflow.rule_book["opening_line"] as string) : ""
  const [text, setText] = useState(stored)
  const [src, setSrc] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState<"preview" | "save" | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [saved, setSaved] = useState(false)
  // A blob: URL holds the clip in memory until revoked.
  useEffect(() => () => src && URL.revokeObjectURL(src), [src])
  const company = me.tenant?.name ?? "your workspace"
  const agent = voice?.name ?? workflow.persona
  const heard = fillOpening(text, { name: EXAMPLE_NAME, agent, company })
  const live = workflow.status === "live"

  const preview = async () => {
    setBusy("preview")
    setError(undefined)
    try {
      const clip = await request<{ mp3_url: string }>("POST", "/api/workflows/preview-opening", {
        text: heard,
        workflow_id: workflow.id,
      })
      // mp3_url may be absolute (PUBLIC_BASE_URL); the page fetches it on its own origin.
      setSrc(await blobUrl(new URL(clip.mp3_url, location.href).pathname))
    } catch (e) {
      setError(e)
    } finally {
      setBusy(undefined)
    }
  }
  const save = async (e: Event) => {
    e.preventDefault()
    setBusy("save")
    setError(undefined)
    setSaved(false)
    try {
      const updated = await request<Workflow>("PUT", `/api/workflows/${workflow.id}`, { opening_line: text.trim() })
      const line = updated.rule_book["opening_line"]
      if (typeof line === "string") setText(line)
      setSaved(true)
      onSaved()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(undefined)
    }
  }
  const lineError =
    error instanceof ApiError
      ? (error.fieldError("opening_line") ?? error.fieldError("rule_book.opening_line"))
      : undefined
  return (
    <section aria-labelledby="preview-h">
      <h3 id="preview-h">Opening line</h3>
      <form onSubmit={save} noValidate>
        {edit ? (
          <Field label="What the agent says first" error={lineError}>
            {(id, d) => (
              <textarea
                id={id}
                aria-describedby={d}
                maxLength={500}
                value={text}
                onInput={(e) => {
                  setText(e.currentTarget.value)
                  setSaved(false)
                }}
              />
            )}
          </Field>
        ) : (
          <p class="prewrap">“{stored}”</p>
        )}
        <ul class="hint placeholders" aria-label="Placeholders">
          <li>
            <code>{"{name}"}</code> — the callee's name, from the audience list
          </li>
          <li>
            <code>{"{agent_name}"}</code> — the voice's name ({agent})
          </li>
          <li>
            <code>{"{company}"}</code> — your workspace's name ({company})
          </li>
        </ul>
        <p>
          Heard as: <span class="prewrap">“{heard}”</span>
        </p>
        {edit && live && <p class="hint">Pause the campaign to change its opening line.</p>}
        <ErrorText error={error} besideFields={["opening_line", "rule_book.opening_line"]} />
        {saved && (
          <p class="ok" role="status">
            Opening line saved.
          </p>
        )}
        <div class="actions">
          {edit && (
            <Button
              type="submit"
              kind="primary"
              busy={busy === "save"}
              disabled={live || text.trim() === stored.trim()}
            >
              Save opening line
            </Button>
          )}
          <Button busy={busy === "preview"} disabled={heard.trim() === ""} onClick={preview}>
            Preview opening
          </Button>
        </div>
      </form>
      {src && (
        // biome-ignore lint/a11y/useMediaCaption: a synthesised clip of the line printed just above
        <audio controls src={src} aria-label="Opening line preview" />
      )}
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
                  Line {r.line}: {r.phone} — {invalidPhoneWords(r.reason)}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </form>
  )
}

interface TeamMember {
  readonly user_id: number
  readonly email: string
  readonly full_name: string | null
}

/**
 * Consent: the statement starts empty (no text is suggested as the workspace's own), and saving it
 * needs an explicit confirmation; once saved, who attested and when.
 */
function Consent({
  workflow,
  edit,
  onAttested,
}: {
  readonly workflow: Workflow
  readonly edit: boolean
  readonly onAttested: () => void
}) {
  const c = workflow.compliance
  const team = useLoad(
    () => request<{ members: TeamMember[] }>("GET", "/members").catch(() => ({ members: [] })),
    [c.consent_attested_by_user_id],
  )
  const [text, setText] = useState("")
  const [confirmed, setConfirmed] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)

  const send = async (e: Event) => {
    e.preventDefault()
    if (text.trim() === "" || !confirmed) return
    setBusy(true)
    setError(undefined)
    try {
      await request("PUT", `/api/workflows/${workflow.id}/compliance`, { consent_attestation_text: text.trim() })
      setText("")
      setConfirmed(false)
      onAttested()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const by = team.data?.members.find((m) => m.user_id === c.consent_attested_by_user_id)
  const who = by ? (by.full_name ? `${by.full_name} (${by.email})` : by.email) : "a member who has since left"
  // An error naming the statement is shown beside it; any other (another field, or none) below.
  const statementError = error instanceof ApiError ? error.fieldError("consent_attestation_text") : undefined
  return (
    <section aria-labelledby="consent-h">
      <h3 id="consent-h">Consent</h3>
      {c.attested ? (
        <div class="ok" data-testid="attested">
          <p>
            Consent attested by {who} on {new Date(c.consent_attested_at!).toLocaleString()}:
          </p>
          <blockquote class="prewrap">{c.consent_attestation_text}</blockquote>
        </div>
      ) : (
        <p>
          Consent is not attested yet: the campaign cannot run until someone states how this audience agreed to be
          called.
        </p>
      )}
      {edit && (
        <form onSubmit={send} noValidate aria-label="Attest consent">
          {c.attested && <p class="hint">Attesting again replaces the statement above.</p>}
          <Field
            label="Consent statement"
            error={statementError}
            hint="Say in your own words how and when these people agreed to be called, and where the records are kept."
          >
            {(fid, d) => (
              <textarea
                id={fid}
                aria-describedby={d}
                maxLength={2000}
                placeholder="For example: everyone on this list ticked “You may call me about my membership” when joining online between 2023 and 2025; the records are in our CRM."
                value={text}
                onInput={(e) => setText(e.currentTarget.value)}
              />
            )}
          </Field>
          <label class="check">
            <input type="checkbox" checked={confirmed} onChange={(e) => setConfirmed(e.currentTarget.checked)} /> I
            confirm every number in this audience gave consent as described
          </label>
          <ErrorText error={error} besideFields={["consent_attestation_text"]} />
          <div class="actions">
            <Button type="submit" kind="primary" busy={busy} disabled={text.trim() === "" || !confirmed}>
              Attest consent
            </Button>
          </div>
        </form>
      )}
    </section>
  )
}
