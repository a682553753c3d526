// Deciding an approval, wherever it is shown (a card on Approvals, a held call's row on Live): the
// approval as GET /api/approvals gives it, its campaign's concession cap, the amount field within
// that cap, Approve and Deny (saying what they do once the call has ended), and the answer's effect.
import { useState } from "preact/hooks"
import { ApiError, request } from "../api.js"
import { Button, ErrorText, Field, money } from "../ui.js"
import { afterCallWords, approvalStatusWords, proposedActionWords } from "../words.js"

export interface Approval {
  readonly id: number
  readonly workflow_id: number
  readonly run_id: number | null
  readonly call_id: number | null
  readonly target_phone: string
  readonly target_name?: string | null
  readonly workflow_name?: string | null
  readonly proposed_action: "concession" | "callback" | "escalate" | string
  readonly proposed_value_minor: number | null
  readonly currency: string
  readonly rationale: string | null
  readonly context: { readonly transcript?: unknown; readonly hold_until?: unknown } | null
  readonly status: string
  readonly created_at: string
  readonly expires_at: string
  readonly decided_at?: string | null
  readonly note?: string | null
  /** Pending only: on_hold while the callee holds for it, else after_call. */
  readonly phase?: "on_hold" | "after_call" | null
  readonly approved_value_minor?: number | null
  readonly decided_phase?: "on_hold" | "after_call" | null
  readonly effect?: string | null
  readonly decided_by_kind?: "user" | "api_key" | "system" | null
  readonly decided_by_name?: string | null
  readonly decided_by_email?: string | null
}

/** POST /api/approvals/{id}/decide's answer. */
export interface Decided {
  readonly id: number
  readonly status: "approved" | "denied"
  readonly decided_at: string | null
  readonly approved_value_minor: number | null
  readonly phase: "on_hold" | "after_call"
  readonly effect: string | null
}

/** A campaign's name and concession cap (its rule book's concession_policy). */
export interface Policy {
  readonly name: string
  readonly capMinor: number | undefined
}

/** "Dee (+12025550107)", or the number alone when the audience gave no name. */
export const calleeOf = (a: { readonly target_name?: string | null; readonly target_phone: string }): string =>
  a.target_name ? `${a.target_name} (${a.target_phone})` : a.target_phone

/** When the held callee stops waiting (ms), if the approval says. */
export function holdUntil(a: Approval): number | undefined {
  const at = typeof a.context?.hold_until === "string" ? Date.parse(a.context.hold_until) : Number.NaN
  return Number.isNaN(at) ? undefined : at
}

/**
 * Whether the callee is on hold for it now: the API's phase, and the hold not yet run out by the
 * clock here (the page is read again soon after, but a card must not look live for a second longer).
 */
export function isHeld(a: Approval, now = Date.now()): boolean {
  if (a.phase !== "on_hold") return false
  const until = holdUntil(a)
  return until === undefined || until > now
}

/** Seconds left on hold, when known. */
export function holdLeft(until: number | undefined, now = Date.now()): number | undefined {
  return until === undefined ? undefined : Math.max(0, Math.round((until - now) / 1000))
}

/** Each campaign's name and cap, fetched once per campaign while the page is shown. */
export function usePolicies(): {
  readonly policies: ReadonlyMap<number, Policy>
  readonly want: (workflowIds: ReadonlyArray<number>) => void
} {
  const [policies, setPolicies] = useState<ReadonlyMap<number, Policy>>(new Map())
  const [asked] = useState(() => new Set<number>())
  const want = (ids: ReadonlyArray<number>) => {
    for (const id of new Set(ids)) {
      if (asked.has(id)) continue
      asked.add(id)
      request<{ name: string; rule_book: Record<string, unknown> }>("GET", `/api/workflows/${id}`).then(
        (w) => {
          const c = w.rule_book["concession_policy"] as { cap_minor?: unknown } | undefined
          const policy: Policy = { name: w.name, capMinor: typeof c?.cap_minor === "number" ? c.cap_minor : undefined }
          setPolicies((m) => new Map(m).set(id, policy))
        },
        // Asked again with the next read.
        () => asked.delete(id),
      )
    }
  }
  return { policies, want }
}

/** An amount typed as "12.34" in minor units, or undefined when it is not one. */
function toMinor(text: string): number | undefined {
  const t = text.trim()
  if (!/^\d+(\.\d{1,2})?$/.test(t)) return undefined
  return Math.round(Number(t) * 100)
}

const asInput = (minor: number) => (minor / 100).toFixed(2)

/**
 * The amount to approve (a concession only, default the proposal, 0 < amount ≤ cap), the two
 * buttons, then a note (below them, so a narrow screen shows the buttons without scrolling). `late`: the call has ended, so the buttons and a line above them say what a
 * decision does now. `withNote`: the note field (Approvals; Live keeps its rows short).
 */
export function DecideControls({
  approval: a,
  policy,
  late,
  withNote = true,
  onDecided,
}: {
  readonly approval: Approval
  readonly policy: Policy | undefined
  readonly late: boolean
  readonly withNote?: boolean
  readonly onDecided: (d: Decided) => void
}) {
  const concession = a.proposed_action === "concession" && a.proposed_value_minor !== null
  const [amount, setAmount] = useState(concession ? asInput(a.proposed_value_minor!) : "")
  const [note, setNote] = useState("")
  const [busy, setBusy] = useState<"approve" | "deny" | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [amountError, setAmountError] = useState<string | undefined>(undefined)
  const cap = policy?.capMinor
  const minor = concession ? toMinor(amount) : undefined
  const words = afterCallWords(
    a.proposed_action,
    concession && minor !== undefined && minor > 0 ? money(minor, a.currency) : null,
  )

  const decide = async (decision: "approve" | "deny") => {
    setError(undefined)
    setAmountError(undefined)
    let value: number | undefined
    if (decision === "approve" && concession) {
      if (minor === undefined || minor <= 0) {
        setAmountError("Enter an amount such as 10 or 12.50.")
        return
      }
      if (cap !== undefined && minor > cap) {
        setAmountError(`At most ${money(cap, a.currency)}, the rule book's cap.`)
        return
      }
      // Sent only when changed: the proposal's own amount needs no cap to be checked against.
      if (minor !== a.proposed_value_minor) value = minor
    }
    setBusy(decision)
    try {
      const body = {
        decision,
        ...(note.trim() !== "" && { note: note.trim() }),
        ...(value !== undefined && { value_minor: value }),
      }
      onDecided(await request<Decided>("POST", `/api/approvals/${a.id}/decide`, body))
    } catch (e) {
      // Someone else decided it first, or it ran out: words.ts says which; the feed takes it off.
      setError(e)
    } finally {
      setBusy(undefined)
    }
  }

  const fieldError = amountError ?? (error instanceof ApiError ? error.fieldError("value_minor") : undefined)
  return (
    <div class="decide">
      {late && <p class="late-explain">{words.explain}</p>}
      {concession && (
        <Field
          label={`Amount to approve (${a.currency})`}
          error={fieldError}
          hint={
            cap === undefined
              ? `Proposed ${money(a.proposed_value_minor!, a.currency)}.`
              : `Proposed ${money(a.proposed_value_minor!, a.currency)}; at most ${money(cap, a.currency)} (the cap).`
          }
        >
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              class="amount"
              type="number"
              inputMode="decimal"
              min="0.01"
              step="0.01"
              max={cap === undefined ? undefined : asInput(cap)}
              value={amount}
              onInput={(e) => setAmount(e.currentTarget.value)}
            />
          )}
        </Field>
      )}
      <div class="actions">
        <Button
          kind="primary"
          busy={busy === "approve"}
          disabled={busy !== undefined}
          onClick={() => decide("approve")}
        >
          {late ? words.approve : "Approve"}
        </Button>
        <Button kind="danger" busy={busy === "deny"} disabled={busy !== undefined} onClick={() => decide("deny")}>
          {late ? words.deny : "Deny"}
        </Button>
      </div>
      {withNote && (
        <Field
          label="Note"
          hint="Optional: kept with the decision (write it before you decide)."
          error={error instanceof ApiError ? error.fieldError("note") : undefined}
        >
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
      )}
      <ErrorText error={error} besideFields={["value_minor", "note"]} />
    </div>
  )
}

/** A decision made on this page, with what it did, as the API said. */
export interface Notice {
  readonly id: number
  readonly text: string
}

export function noticeOf(a: Approval, d: Decided): Notice {
  const amount =
    d.status === "approved" && a.proposed_action === "concession" && d.approved_value_minor !== null
      ? ` at ${money(d.approved_value_minor, a.currency)}`
      : ""
  const what = proposedActionWords(a.proposed_action).toLowerCase()
  return {
    id: a.id,
    text: `${approvalStatusWords(d.status)}${amount}: the ${what} for ${calleeOf(a)}. ${d.effect ?? ""}`.trim(),
  }
}

/** The decisions made here, newest first, each with its effect (a status region: read out as it comes). */
export function Notices({ notices }: { readonly notices: ReadonlyArray<Notice> }) {
  return (
    <div role="status" class="notices">
      {notices.map((n) => (
        <p key={n.id} class="ok" data-testid="decision-effect">
          {n.text}
        </p>
      ))}
    </div>
  )
}
