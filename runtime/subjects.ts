// Bus subjects between api and runtime processes, in one place so both sides agree.

/** Request/reply: any runtime process answers (queue group RUNTIME_QUEUE) with RuntimePong. */
export const RT_PING = "rt.ping"
export const RUNTIME_QUEUE = "runtime"

export interface RuntimePong {
  readonly instance_id: string
  readonly host: string
  readonly started_at: string
}
