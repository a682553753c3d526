// One run's approvals: an approval actor per pending proposal (its row written first), restored
// from Postgres when the run is claimed, and decisions arriving from the api relayed to the
// approval actor and to the call that waits on it. A new approval and an expiry are announced to
// the supervisors' queues (approvals.<tenant>) once committed.
import { type Actor, createActor } from "xstate"
import { type ApprovalInput, type ApprovalRequest, approvalMachine, MACHINE_VERSIONS } from "../../machines/index.js"
import { announceApprovalChange, expireAndAnnounce } from "../../src/approvals/approval-changes.js"
import * as approvals from "../../src/approvals/approvals.repo.js"
import { backgroundFailures } from "../../src/platform/metrics.js"
import { type LiveCall, type RunScope, realHoldMs } from "./run-scope.js"
import { SnapshotWriter } from "./snapshots.js"

type ProvidedApprovalMachine = ReturnType<typeof approvalMachine.provide>
type ApprovalActor = Actor<ProvidedApprovalMachine>

export class RunApprovals {
  /** The run's pending approvals: each one's actor and the writer of its snapshots. */
  private readonly actors = new Map<number, { actor: ApprovalActor; writer: SnapshotWriter }>()
  private provided: ProvidedApprovalMachine | undefined

  constructor(private readonly scope: RunScope) {}

  /** Restores the actors of the run's pending approvals (after a claim or a takeover). */
  async restore(): Promise<void> {
    const rows = await approvals.pendingApprovalsOfRun(this.scope.deps.sql, this.scope.runId)
    for (const a of rows) {
      if (this.actors.has(a.id)) continue
      const restorable = a.snapshot !== null && a.machine_version === MACHINE_VERSIONS.approval
      const actor = this.start(restorable ? a.snapshot : undefined, {
        approvalId: a.id,
        tenantId: a.tenant_id,
        runId: a.run_id,
        callId: a.call_id,
        action: a.proposed_action,
        valueMinor: a.proposed_value_minor,
        expiresAt: a.expires_at.getTime(),
        now: Date.now(),
      })
      actor.send({ type: "REARM", now: Date.now() })
    }
  }

  /** A call proposed something: its approval row and actor, then APPROVAL_CREATED to the call. */
  async request(live: LiveCall, req: ApprovalRequest): Promise<void> {
    const s = this.scope
    const { sql, bus, settings, log } = s.deps
    try {
      const row = await approvals.insertApproval(sql, {
        tenantId: s.tenantId,
        workflowId: s.workflowId,
        runId: s.runId,
        callId: req.callId,
        phone: req.phone,
        action: req.proposal.action,
        valueMinor: req.proposal.valueMinor,
        currency: s.currency,
        rationale: req.proposal.rationale,
        context: {
          attempt: live.attempt,
          target_id: live.targetId,
          turns: live.turns,
          transcript: [...live.recent],
          // When the held callee stops waiting (the call machine's approvalHold, scaled as it is):
          // a supervisor's screen counts down to it; expires_at, much later, ends decidability.
          hold_until: new Date(Date.now() + realHoldMs(settings)).toISOString(),
        },
        ttlMs: settings.approvalTtlMs,
      })
      announceApprovalChange(bus, log, s.tenantId, { approvalId: row.id, status: "pending", at: row.created_at })
      this.start(undefined, {
        approvalId: row.id,
        tenantId: s.tenantId,
        runId: s.runId,
        callId: req.callId,
        action: req.proposal.action,
        valueMinor: req.proposal.valueMinor,
        expiresAt: row.expires_at.getTime(),
        now: Date.now(),
      })
      live.actor.send({ type: "APPROVAL_CREATED", approvalId: row.id })
    } catch (err) {
      log.error({ err, call_id: req.callId }, "could not create an approval")
    }
  }

  /**
   * The approval machine with this run's effects, made once per run: providing a machine builds its
   * whole state tree again, which per approval cost more than the actor (a wave of callees asking at
   * once stalled the event loop on it). The effects find their approval by id.
   */
  private machine(): ProvidedApprovalMachine {
    if (this.provided !== undefined) return this.provided
    const deps = this.scope.deps
    const { log } = deps
    this.provided = approvalMachine.provide({
      actions: {
        // After the transition (the actor's first persist runs while it starts).
        persist: (_, ref) =>
          queueMicrotask(() => {
            const a = this.actors.get(ref.approvalId)
            if (a !== undefined) a.writer.write(a.actor.getPersistedSnapshot())
          }),
        decided: (_, r) => {
          if (r.status !== "expired") return
          // Not recorded now: the host's approval sweep expires it on its next pass (expireAndAnnounce "due").
          void expireAndAnnounce(deps, r.approvalId).catch((err: unknown) => {
            backgroundFailures.labels("approval_expiry").inc()
            log.error(
              { err, approval_id: r.approvalId, run_id: r.runId, tenant_id: r.tenantId },
              "could not record an approval's expiry; the approval sweep retries it",
            )
          })
        },
      },
    })
    return this.provided
  }

  private start(snapshot: unknown, input: ApprovalInput): ApprovalActor {
    const { sql, log } = this.scope.deps
    const save = (s: unknown) => approvals.saveApprovalSnapshot(sql, input.approvalId, s, MACHINE_VERSIONS.approval)
    const machine = this.machine()
    const actor: ApprovalActor =
      snapshot === undefined
        ? createActor(machine, { input })
        : createActor(machine, { snapshot: snapshot as never, input })
    this.actors.set(input.approvalId, { actor, writer: new SnapshotWriter(save, log) })
    // Forgotten after the persist its last transition queued.
    actor.subscribe({ complete: () => queueMicrotask(() => this.actors.delete(input.approvalId)) })
    actor.start()
    return actor
  }

  /**
   * An approval was decided in Postgres (by an api process): its actor ends, its call resumes (with
   * the approved amount of a concession, `valueMinor`, when the decision carries one).
   */
  decided(
    approvalId: number,
    callId: number | null,
    status: "approved" | "denied",
    by: number | null,
    valueMinor: number | null = null,
  ): void {
    const actor = this.actors.get(approvalId)?.actor
    const decision = status === "approved" ? "approve" : "deny"
    if (actor?.getSnapshot().can({ type: "DECIDE", decision, by: by ?? 0, at: Date.now() }))
      actor.send({ type: "DECIDE", decision, by: by ?? 0, at: Date.now() })
    const call = callId === null ? undefined : this.scope.calls.get(callId)
    call?.actor.send({ type: "APPROVAL_DECIDED", approvalId, decision: status, valueMinor })
  }

  stop(): void {
    for (const a of this.actors.values()) a.actor.stop()
    this.actors.clear()
  }
}
