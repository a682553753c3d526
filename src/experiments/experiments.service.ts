// Experiments (POST/GET/PATCH /api/workflows/{id}/experiments): a workflow's calls split between two
// to four arms, each a variant of its rule book, persona or voice; an arm stopped; the winner promoted
// to the workflow's rule book; and each experiment's readout (src/experiments/readout.ts).
import { randomInt } from "node:crypto"
import { Effect } from "effect"
import { AGREED_OUTCOMES } from "../analytics/analytics.repo.js"
import type { Principal } from "../auth/principal.js"
import { publishOrWarn } from "../platform/Bus.js"
import { Db, type Sql, type Tx } from "../platform/Db.js"
import { Conflict, NotFound, RuleBookInvalid, ValidationFailed } from "../platform/errors.js"
import { type ExperimentChanged, experimentChangedSubject } from "../platform/subjects.js"
import { findAvatar } from "../voices/avatars.repo.js"
import { findVoice } from "../voices/voices.catalog.js"
import { type RuleBook, validateRuleBook } from "../workflows/rulebook.schema.js"
import * as workflows from "../workflows/workflows.repo.js"
import {
  ARM_RULE_BOOK_FIELDS,
  armRuleBook,
  type ExperimentCreate,
  type ExperimentPatch,
  MAX_SEED,
} from "./experiment.schema.js"
import * as repo from "./experiments.repo.js"
import { rate, readout } from "./readout.js"

const notFound = (what: string) => new NotFound({ message: `${what} not found` })
const userIdOf = (p: Principal): number | null => (p.kind === "user" ? p.userId : null)
const invalid = (errors: { field: string; message: string }[]) =>
  new ValidationFailed({ message: errors.map((e) => `${e.field} ${e.message}`).join("; "), errors })

/** Tells the runtime processes the workflow's experiment changed; best effort (runs also load it when they start). */
const announce = (tenantId: number, workflowId: number) =>
  Effect.gen(function* () {
    const message: ExperimentChanged = { tenant_id: tenantId, workflow_id: workflowId }
    yield* publishOrWarn(experimentChangedSubject(tenantId), message, "could not announce an experiment's change", {
      workflow_id: workflowId,
    })
  })

/** A campaign of the workspace that can take an experiment, with its rule book. */
const campaignOf = (tx: Tx, tenantId: number, workflowId: number) =>
  Effect.gen(function* () {
    const w = yield* Effect.promise(() => workflows.lockWorkflow(tx, tenantId, workflowId))
    if (w === undefined || w.kind !== "campaign" || w.archived_at !== null)
      return yield* Effect.fail(notFound(`workflow ${workflowId}`))
    if (w.status === "retired")
      return yield* Effect.fail(
        new Conflict({ code: "WORKFLOW_RETIRED", message: `workflow ${w.id} is retired and cannot change` }),
      )
    if (w.rule_book === null)
      return yield* Effect.fail(
        new Conflict({
          code: "WORKFLOW_NOT_READY",
          message: `workflow ${w.id} has no rule book to vary`,
          details: { missing: ["rule_book"] },
        }),
      )
    return { ...w, rule_book: w.rule_book }
  })

/**
 * Every arm's problems at once: names, rule-book fields, the merged book's validity, cloned voices. Answers
 * each arm's changes as the validated book has them (anything the schema does not know is left out).
 */
const checkArms = (tx: Tx, tenantId: number, base: RuleBook, arms: ExperimentCreate["arms"]) =>
  Effect.gen(function* () {
    const changes: Array<Record<string, unknown> | null> = []
    const tenant = (yield* Effect.promise(() => workflows.findTenantContext(tx, tenantId)))!
    const errors: { field: string; message: string }[] = []
    const seen = new Map<string, number>()
    for (const [i, arm] of arms.entries()) {
      const key = arm.name.toLowerCase()
      const first = seen.get(key)
      if (first !== undefined) errors.push({ field: `arms.${i}.name`, message: `repeats arms.${first}.name` })
      else seen.set(key, i)
      for (const field of Object.keys(arm.rule_book ?? {}))
        if (!ARM_RULE_BOOK_FIELDS.includes(field))
          errors.push({ field: `arms.${i}.rule_book.${field}`, message: "is not a rule-book field an arm can change" })
      const book = validateRuleBook(
        armRuleBook(base, { persona: arm.persona ?? null, rule_book: arm.rule_book ?? null }),
        {
          currency: tenant.currency,
          planTier: tenant.plan_tier,
        },
      )
      if (!book.ok)
        for (const e of book.errors) errors.push({ field: `arms.${i}.rule_book.${e.field}`, message: e.message })
      else if (arm.rule_book === undefined) changes.push(null)
      else {
        const valid = book.value as Record<string, unknown>
        changes.push(Object.fromEntries(Object.keys(arm.rule_book).map((k) => [k, valid[k]])))
      }
      if (arm.voice !== undefined && (yield* Effect.promise(() => findAvatar(tx, tenantId, arm.voice!))) === undefined)
        errors.push({ field: `arms.${i}.voice`, message: "is not one of the workspace's voices" })
    }
    if (errors.length > 0) return yield* Effect.fail(invalid(errors))
    return changes
  })

/** Runs `work` in one transaction; a failure rolls it back. */
const transaction = <A, E>(work: (tx: Tx) => Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const result = yield* Effect.promise(() =>
      sql
        .begin(async (tx) => {
          const exit = await Effect.runPromiseExit(work(tx))
          if (exit._tag === "Failure") throw new Rollback(exit)
          return exit
        })
        .catch((e: unknown) => {
          if (e instanceof Rollback) return e.exit
          throw e
        }),
    )
    return yield* result as typeof result & Effect.Effect<A, E>
  })

class Rollback {
  constructor(readonly exit: unknown) {}
}

export const createExperiment = (caller: Principal, workflowId: number, input: ExperimentCreate) =>
  Effect.gen(function* () {
    const tenantId = caller.tenantId
    const row = yield* transaction((tx) =>
      Effect.gen(function* () {
        const w = yield* campaignOf(tx, tenantId, workflowId)
        const running = yield* Effect.promise(() => repo.runningExperiment(tx, workflowId))
        if (running !== undefined)
          return yield* Effect.fail(
            new Conflict({
              code: "EXPERIMENT_RUNNING",
              message: `workflow ${workflowId} already runs experiment ${running.id}: end it first`,
              details: { experiment_id: running.id },
            }),
          )
        const changes = yield* checkArms(tx, tenantId, w.rule_book, input.arms)
        return yield* Effect.promise(() =>
          repo.insertExperiment(tx, {
            tenantId,
            workflowId,
            name: input.name,
            seed: input.seed ?? randomInt(MAX_SEED + 1),
            arms: input.arms.map((a, i) => ({
              name: a.name,
              weight: a.weight,
              stopped_at: null,
              persona: a.persona ?? null,
              voice: a.voice ?? null,
              rule_book: changes[i] ?? null,
            })),
            userId: userIdOf(caller),
          }),
        )
      }),
    )
    yield* announce(tenantId, workflowId)
    return yield* viewOf(row)
  })

/** A workflow of the workspace (a campaign), or NotFound. */
const requireWorkflow = (tenantId: number, workflowId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const w = yield* Effect.promise(() => workflows.findWorkflowDetail(sql, tenantId, workflowId))
    if (w === undefined || w.kind !== "campaign") return yield* Effect.fail(notFound(`workflow ${workflowId}`))
  })

export const listExperiments = (tenantId: number, workflowId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* requireWorkflow(tenantId, workflowId)
    const rows = yield* Effect.promise(() => repo.listExperiments(sql, tenantId, workflowId, 50))
    return { data: yield* Effect.forEach(rows, viewOf) }
  })

export const getExperiment = (tenantId: number, workflowId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const row = yield* Effect.promise(() => repo.findExperiment(sql, tenantId, workflowId, id))
    if (row === undefined) return yield* Effect.fail(notFound(`experiment ${id}`))
    return yield* viewOf(row)
  })

const ended = (e: repo.ExperimentRow) =>
  new Conflict({ code: "EXPERIMENT_ENDED", message: `experiment ${e.id} has ended`, details: { status: e.status } })

export const patchExperiment = (caller: Principal, workflowId: number, id: number, p: ExperimentPatch) =>
  Effect.gen(function* () {
    const tenantId = caller.tenantId
    const row = yield* transaction((tx) =>
      Effect.gen(function* () {
        // The workflow's lock first (as promoting takes it), then the experiment's.
        const w = yield* campaignOf(tx, tenantId, workflowId).pipe(
          Effect.catchTag("Conflict", () => Effect.succeed(undefined)),
        )
        const e = yield* Effect.promise(() => repo.findExperiment(tx, tenantId, workflowId, id, { lock: true }))
        if (e === undefined) return yield* Effect.fail(notFound(`experiment ${id}`))
        if (p.promote !== undefined) return yield* promote(tx, caller, w, e, p.promote)
        if (e.status === "ended") return yield* Effect.fail(ended(e))
        if (p.status === "ended") yield* Effect.promise(() => repo.endExperiment(tx, e.id))
        if (p.arms !== undefined) yield* stopArms(tx, e, p.arms)
        return (yield* Effect.promise(() => repo.findExperiment(tx, tenantId, workflowId, id)))!
      }),
    )
    yield* announce(tenantId, workflowId)
    return yield* viewOf(row)
  })

const stopArms = (tx: Tx, e: repo.ExperimentRow, stops: ReadonlyArray<{ name: string }>) =>
  Effect.gen(function* () {
    const names = new Set(stops.map((s) => s.name))
    const errors = stops.flatMap((s, i) =>
      e.arms.some((a) => a.name === s.name)
        ? []
        : [{ field: `arms.${i}.name`, message: "is not an arm of this experiment" }],
    )
    if (errors.length > 0) return yield* Effect.fail(invalid(errors))
    const now = new Date().toISOString()
    const arms = e.arms.map((a) => (names.has(a.name) && a.stopped_at === null ? { ...a, stopped_at: now } : a))
    if (arms.every((a) => a.stopped_at !== null))
      return yield* Effect.fail(
        invalid([{ field: "arms", message: "would stop every arm: end the experiment instead (status ended)" }]),
      )
    yield* Effect.promise(() => repo.updateArms(tx, e.id, arms))
  })

/**
 * The arm's variant becomes the workflow's: its rule book as a new version, its persona (the workspace
 * persona assignment gives way to it) and its cloned voice; the experiment ends, naming the arm. As a
 * rule-book edit, refused while the workflow is live.
 */
const promote = (
  tx: Tx,
  caller: Principal,
  w: (workflows.WorkflowDetailRow & { rule_book: RuleBook }) | undefined,
  e: repo.ExperimentRow,
  armName: string,
) =>
  Effect.gen(function* () {
    if (w === undefined) {
      return yield* Effect.fail(
        new Conflict({ code: "WORKFLOW_RETIRED", message: `workflow ${e.workflow_id} is retired and cannot change` }),
      )
    }
    if (e.promoted_arm !== null)
      return yield* Effect.fail(
        new Conflict({
          code: "EXPERIMENT_ENDED",
          message: `experiment ${e.id} already promoted ${e.promoted_arm}`,
          details: { status: e.status, promoted_arm: e.promoted_arm },
        }),
      )
    if (w.status === "live")
      return yield* Effect.fail(
        new Conflict({
          code: "WORKFLOW_LIVE",
          message: `workflow ${w.id} is live: pause it before you promote an arm`,
        }),
      )
    const arm = e.arms.find((a) => a.name === armName)
    if (arm === undefined)
      return yield* Effect.fail(invalid([{ field: "promote", message: "is not an arm of this experiment" }]))
    const tenant = (yield* Effect.promise(() => workflows.findTenantContext(tx, e.tenant_id)))!
    const checked = validateRuleBook(armRuleBook(w.rule_book, arm), {
      currency: tenant.currency,
      planTier: tenant.plan_tier,
    })
    if (!checked.ok)
      return yield* Effect.fail(
        new RuleBookInvalid({ message: `arm ${arm.name}'s rule book no longer validates`, errors: checked.errors }),
      )
    const book = checked.value
    const version = yield* Effect.promise(() =>
      workflows.insertRuleBookVersion(tx, {
        tenantId: e.tenant_id,
        workflowId: w.id,
        body: book,
        source: "edited",
        nlPrompt: null,
        model: null,
        userId: userIdOf(caller),
      }),
    )
    yield* Effect.promise(async () => {
      await workflows.updateWorkflowSettings(tx, w.id, {
        name: w.name,
        persona: book.persona,
        scheduleKind: w.schedule_kind,
        schedule: w.schedule,
        nlPrompt: w.nl_prompt,
      })
      if (arm.persona !== null) await workflows.setWorkflowPersona(tx, w.id, null)
      if (arm.voice !== null) await workflows.setWorkflowVoice(tx, w.id, arm.voice)
      await repo.endExperiment(tx, e.id, { arm: arm.name, ruleBookId: version.id })
    })
    return (yield* Effect.promise(() => repo.findExperiment(tx, e.tenant_id, e.workflow_id, e.id)))!
  })

// --- the readout ----------------------------------------------------------------------------------

const emptyTotals = (arm: string): repo.ArmTotalsRow => ({
  arm,
  targets: 0,
  calls: 0,
  connects: 0,
  agreed: 0,
  analysed: 0,
  goal_met: 0,
  opted_out: 0,
  talk_seconds: 0,
  approvals_asked: 0,
  approvals_granted: 0,
  cost_minor: 0,
})

const counted = (successes: number, n: number) => ({ ...rate(successes, n), successes })

/**
 * Each arm's figures over its targets (the unit assigned): reached (connects over targets), agreement,
 * opt-outs and talk time over the targets reached, goal met over those analysed; then each rate's
 * comparison of the arms (the first is the control) and the headline on agreement.
 */
export async function experimentReadout(sql: Sql | Tx, e: repo.ExperimentRow) {
  const [rows, tenant] = await Promise.all([
    repo.armTotals(sql, e.id, AGREED_OUTCOMES),
    workflows.findTenantContext(sql, e.tenant_id),
  ])
  const byArm = new Map(rows.map((r) => [r.arm, r]))
  const totals = e.arms.map((a) => byArm.get(a.name) ?? emptyTotals(a.name))
  const of = (pick: (t: repo.ArmTotalsRow) => [successes: number, n: number]) =>
    totals.map((t) => ({ name: t.arm, successes: pick(t)[0], n: pick(t)[1] }))
  const agreement = readout(
    of((t) => [t.agreed, t.connects]),
    "agreement",
  )
  return {
    unit: "target" as const,
    currency: tenant?.currency ?? "USD",
    arms: totals.map((t) => ({
      name: t.arm,
      targets: t.targets,
      calls: t.calls,
      connects: counted(t.connects, t.targets),
      agreement: counted(t.agreed, t.connects),
      goal_met: counted(t.goal_met, t.analysed),
      opt_outs: counted(t.opted_out, t.connects),
      approvals_asked: t.approvals_asked,
      approvals_granted: t.approvals_granted,
      talk_seconds_avg: t.connects === 0 ? null : Math.round((t.talk_seconds / t.connects) * 10) / 10,
      cost_minor: Math.round(t.cost_minor),
      cost_per_agreement_minor: t.agreed === 0 ? null : Math.round(t.cost_minor / t.agreed),
    })),
    agreement,
    goal_met: readout(
      of((t) => [t.goal_met, t.analysed]),
      "goal_met",
    ),
    connect: readout(
      of((t) => [t.connects, t.targets]),
      "connect",
    ),
    opt_out: readout(
      of((t) => [t.opted_out, t.connects]),
      "opt_out",
    ),
    better: agreement.better,
    decided: agreement.decided,
    statement: agreement.statement,
  }
}

/** The experiment as every endpoint shows it, with its readout (read on `sql`: a caller's transaction too). */
export async function experimentView(sql: Sql | Tx, e: repo.ExperimentRow) {
  return {
    id: e.id,
    workflow_id: e.workflow_id,
    name: e.name,
    status: e.status,
    seed: e.seed,
    arms: e.arms.map((a) => ({
      name: a.name,
      weight: a.weight,
      stopped: a.stopped_at !== null,
      stopped_at: a.stopped_at,
      persona: a.persona,
      agent_name: a.persona === null ? null : (findVoice(a.persona)?.name ?? null),
      voice: a.voice,
      rule_book: a.rule_book,
    })),
    promoted_arm: e.promoted_arm,
    promoted_rule_book_id: e.promoted_rule_book_id,
    rehearses: e.rehearses,
    created_at: e.created_at.toISOString(),
    ended_at: e.ended_at?.toISOString() ?? null,
    readout: await experimentReadout(sql, e),
  }
}

const viewOf = (e: repo.ExperimentRow) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return yield* Effect.promise(() => experimentView(sql, e))
  })
