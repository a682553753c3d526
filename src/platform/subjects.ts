// Every bus subject, and the builder of each, in one place: publishers and subscribers in api and
// runtime processes agree by importing these. Nothing else spells a subject.

/** Request/reply: any runtime process answers (queue group RUNTIME_QUEUE) with RuntimePong. */
export const RT_PING = "rt.ping"
export const RUNTIME_QUEUE = "runtime"

export interface RuntimePong {
  readonly instance_id: string
  readonly host: string
  readonly started_at: string
  /**
   * How calls heard as audio are recognised in that process: "pocketsphinx", or "script" (the
   * stand-in told simulated callees' lines: PocketSphinx is not installed); null: MEDIA_STREAMS=none.
   */
  readonly recognition?: "pocketsphinx" | "script" | null
}

/**
 * Published by api processes after a run was started or resumed in Postgres: any runtime
 * process may claim it (claims are decided by the run's lease row, not by who heard this).
 */
export const RT_RUN_WAKE = "rt.run.wake"
/**
 * Published after a run was paused or cancelled in Postgres: the run's owner acts on it. `end_call`
 * (with call_id): the owner hangs that call up (a data-subject erase ends a live call with the contact).
 */
export const RT_RUN_CONTROL = "rt.run.control"
/** Published after an approval was decided in Postgres: the owner of its call resumes the conversation. */
export const RT_APPROVAL_DECIDED = "rt.approval.decided"

export interface RunControl {
  readonly run_id: number
  readonly tenant_id: number
  readonly command: "start" | "resume" | "pause" | "cancel" | "end_call"
  readonly call_id?: number
}

export interface ApprovalDecided {
  readonly approval_id: number
  readonly call_id: number | null
  readonly run_id: number | null
  readonly status: "approved" | "denied"
  /** An approved concession's amount (the approver's, else the proposal's); absent from older senders. */
  readonly value_minor?: number | null
}

/**
 * A telco_a call's webhooks, carried from the api process the provider called to the runtime
 * process holding the call: request/reply, the reply being the voice webhook's TwiML answer.
 */
export const rtTelcoCall = (callId: number) => `rt.telco.call.${callId}`

export interface TelcoWebhookMessage {
  readonly kind: "voice" | "status"
  readonly params: Readonly<Record<string, string>>
}

/**
 * Patch-in (request/reply): the runtime process holding the call moves its callee into a recorded
 * conference with the operator and answers with a CallHandoffReply; the others stay silent.
 */
export const rtCallHandoff = (callId: number) => `rt.call.handoff.${callId}`
/** What each runtime process subscribes to: every call's patch-in. */
export const RT_CALL_HANDOFF_ANY = "rt.call.handoff.*"

export interface CallHandoffRequest {
  readonly call_id: number
  readonly tenant_id: number
  readonly operator_number: string
}

export type CallHandoffReply =
  | { readonly status: "handed_off"; readonly conference_id: string }
  | { readonly status: "refused"; readonly reason: "not_live" | "handed_off" | "failed"; readonly message?: string }

/** One transcript turn: `turns.<tenant>.<run>.<target>` (a TurnMessage, src/turns/turn.message.ts). */
export const turnSubject = (tenantId: number, runId: number, targetId: number | "*" | ">") =>
  `turns.${tenantId}.${runId}.${targetId}`

/** Every turn of one run, whichever target: what an api process watching the run subscribes to. */
export const runTurnsSubject = (tenantId: number, runId: number) => turnSubject(tenantId, runId, ">")

/** Request/gather: every api process forgets what it cached about a credential (src/auth/). */
export const AUTH_INVALIDATE_SUBJECT = "auth.invalidate"

/**
 * Published after a workspace's knowledge-base rules changed in Postgres: each runtime process
 * reloads the rules of that workspace's runs it drives, so their next turns follow them.
 */
export const kbRulesChangedSubject = (tenantId: number) => `kb.rules.${tenantId}`
/** What a runtime process subscribes to: every workspace's rule changes. */
export const KB_RULES_CHANGED_ANY = "kb.rules.*"

/**
 * Published after a workflow's experiment began, changed (an arm stopped) or ended in Postgres: each
 * runtime process reloads the experiment of that workflow's runs it drives, so their next calls follow it.
 */
export const experimentChangedSubject = (tenantId: number) => `experiments.changed.${tenantId}`
/** What a runtime process subscribes to: every workspace's experiment changes. */
export const EXPERIMENT_CHANGED_ANY = "experiments.changed.*"

export interface ExperimentChanged {
  readonly tenant_id: number
  readonly workflow_id: number
}

export interface KbRulesChanged {
  readonly tenant_id: number
  /** The workflow whose rules changed; null when a workspace-wide rule did (every workflow's). */
  readonly workflow_id: number | null
}

/**
 * Work queue: fetch a data source's rows again (src/data/). Any runtime process takes it (queue
 * group RUNTIME_QUEUE); one fetch of a source runs at a time.
 */
export const DATA_SOURCE_FETCH = "rt.data.fetch"

export interface DataSourceFetch {
  readonly source_id: number
  readonly tenant_id: number
}

/**
 * Work queue nudge: calls ended, so post-call analysis has work (runtime/workers/analysis-worker.ts). Any one
 * runtime process takes it (queue group RUNTIME_QUEUE) and looks at once rather than at its next
 * poll; the rows in call_analyses decide who analyses what, not who heard this. No payload.
 */
export const RT_ANALYSIS_DUE = "rt.analysis.due"

/**
 * Work queue nudge: webhook deliveries are due (runtime/workers/webhook-delivery.ts). Any one runtime
 * process takes it (queue group RUNTIME_QUEUE) and claims at once rather than at its next poll; the
 * deliveries' leases decide who posts what, not who heard this. No payload.
 */
export const RT_WEBHOOKS_DUE = "rt.webhooks.due"

/**
 * Published after an approval was created, decided, expired or cancelled (a data-subject erase) in
 * Postgres: each api process passes it to the workspace's approval streams (GET
 * /api/approvals/stream), so a supervisor's queue changes at once. Every api process hears it.
 */
export const approvalsSubject = (tenantId: number) => `approvals.${tenantId}`

export interface ApprovalChanged {
  readonly approval_id: number
  readonly status: "pending" | "approved" | "denied" | "expired"
  /** When it happened (ISO 8601). */
  readonly at: string
}

/** The database's NOTIFY channel: workspaces whose listed data a commit changed (migration 0046). */
export const READS_CHANNEL = "parley_reads"

/**
 * Request/gather: a change made through one api process; every other one drops the workspace's
 * kept list answers and acknowledges (api/pipeline/cached-reads.ts).
 */
export const READS_CHANGED_SUBJECT = "reads.changed"

/** Each api process says it is there (a heartbeat), so a change knows how many acknowledgements to wait for. */
export const READS_PEERS_SUBJECT = "reads.peers"

/**
 * A call's carrier media stream, between the api process holding the WebSocket and the runtime
 * process holding the call (api/media-streams.ts): what the carrier sends (`in`: μ-law audio as
 * bytes, header kind "media"; the stream's other events as JSON, header kind "start" | "mark" |
 * "dtmf" | "stop" | "closed") and what to send it (`out`: kind "media" bytes, "mark" {name},
 * "clear", "hangup").
 */
export const mediaInSubject = (tenantId: number, callId: number) => `media.${tenantId}.${callId}.in`
export const mediaOutSubject = (tenantId: number, callId: number) => `media.${tenantId}.${callId}.out`

/** The header that says what a media-stream bus message is. */
export const MEDIA_KIND_HEADER = "kind"
