// Whether a workflow may run: the one predicate POST /api/workflows/{id}/run decides by (409
// WORKFLOW_NOT_READY with `missing`) and GET /api/workflows/{id} shows as `readiness`, so the
// console can say why Run is disabled before anyone presses it.

export type ReadinessGap = "rule_book" | "audience" | "compliance" | "email_verified"

/** What the predicate reads of a workflow. */
export interface ReadinessInput {
  readonly rule_book_id: number | null
  readonly audience_count: number
  /** Consent attested (PUT .../compliance). */
  readonly attested: boolean
}

/**
 * What keeps a workflow from running. `email_verified`: the workspace owner has not confirmed
 * their address (link or OTP sign-in), so a throwaway signup cannot spend the trial credit on real
 * calls. It is the workspace's owner, not the caller, since API keys act for the workspace.
 */
export const readinessGaps = (g: ReadinessInput, ownerVerified: boolean): ReadinessGap[] => [
  ...(g.rule_book_id === null ? (["rule_book"] as const) : []),
  ...(g.audience_count === 0 ? (["audience"] as const) : []),
  ...(g.attested ? [] : (["compliance"] as const)),
  ...(ownerVerified ? [] : (["email_verified"] as const)),
]

/** Besides readiness, what else POST run refuses with 409: a retired workflow, a run already running. */
export type RunBlock = "retired" | "run_in_progress"

export const runBlock = (w: { readonly status: string; readonly running_run_id: number | null }): RunBlock | null =>
  w.status === "retired" ? "retired" : w.running_run_id !== null ? "run_in_progress" : null
