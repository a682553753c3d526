// Bus subjects between api and runtime processes, in one place so both sides agree.

/** Request/reply: any runtime process answers (queue group RUNTIME_QUEUE) with RuntimePong. */
export const RT_PING = "rt.ping"
export const RUNTIME_QUEUE = "runtime"

export interface RuntimePong {
  readonly instance_id: string
  readonly host: string
  readonly started_at: string
}

/**
 * Published by api processes after a run was started or resumed in Postgres: any runtime
 * process may claim it (claims are decided by the run's lease row, not by who heard this).
 */
export const RT_RUN_WAKE = "rt.run.wake"
/** Published after a run was paused or cancelled in Postgres: the run's owner acts on it. */
export const RT_RUN_CONTROL = "rt.run.control"
/** Published after an approval was decided in Postgres: the owner of its call resumes the conversation. */
export const RT_APPROVAL_DECIDED = "rt.approval.decided"

export interface RunControl {
  readonly run_id: number
  readonly tenant_id: number
  readonly command: "start" | "resume" | "pause" | "cancel"
}

export interface ApprovalDecided {
  readonly approval_id: number
  readonly call_id: number | null
  readonly run_id: number | null
  readonly status: "approved" | "denied"
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
