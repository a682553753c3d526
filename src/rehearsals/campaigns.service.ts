// Simulation campaigns: a free rehearsal of a workflow against simulated callees, run by the real
// runtime. A campaign owns a hidden workflow (the rehearsed one's rule book, persona and voice)
// with the simulated audience and one run whose targets are held back and released a batch at a
// time. Its state machine (machines/sim-campaign.machine.ts, run by runtime/ behind the
// CampaignMachine port) is the transition function: every read and command first reconciles it
// with what Postgres says the run has done, under the campaign's row lock, then applies the
// command; the runtime hears of changes over the bus.
import { Effect } from "effect"
import type { SimCampaignEvent, SimCampaignSnapshot, SimCampaignState } from "../../machines/sim-campaign.machine.js"
import { decideApproval } from "../approvals/approvals.service.js"
import { insertSimulatedTargets } from "../audience/audience.repo.js"
import type { Principal } from "../auth/principal.js"
import { findExperiment, insertExperiment, listExperiments } from "../experiments/experiments.repo.js"
import { experimentView } from "../experiments/experiments.service.js"
import { AppConfig } from "../platform/AppConfig.js"
import { publishOrWarn } from "../platform/Bus.js"
import { Db, type Tx } from "../platform/Db.js"
import { Conflict, NotFound, RuleBookInvalid, ValidationFailed } from "../platform/errors.js"
import { RT_RUN_CONTROL, RT_RUN_WAKE, type RunControl } from "../platform/subjects.js"
import {
  finalOutcomeCounts,
  holdUndialedTargets,
  releaseHeldTargets,
  simulationProgress,
} from "../runs/run-targets.repo.js"
import { insertHeldRun, pauseSimulationRun, resumeRun, runEndOf } from "../runs/runs.repo.js"
import { validateRuleBook } from "../workflows/rulebook.schema.js"
import {
  findTenantContext,
  findWorkflowDetail,
  insertSimulationWorkflow,
  renameSimulationWorkflow,
} from "../workflows/workflows.repo.js"
import { CampaignMachine, type CampaignMachinePort } from "./CampaignMachine.js"
import { type CampaignView, campaignView, sampleOf } from "./campaign.view.js"
import * as repo from "./campaigns.repo.js"
import { type DialingCapacity, forecast } from "./forecast.js"
import { DEFAULT_SIM_MIX, drawCallees, MAX_SEED, type SimMix } from "./mix.js"

/** Active (ready, running, awaiting_answer) campaigns a workspace may have at once. */
export const MAX_ACTIVE_CAMPAIGNS = 3
export const DEFAULT_SIZE = 20
export const DEFAULT_BATCH_SIZE = 10

export interface StartInput {
  readonly workflow_id: number
  readonly mix?: SimMix | undefined
  readonly size?: number | undefined
  readonly batch_size?: number | undefined
  readonly seed?: number | undefined
  readonly time_scale?: number | undefined
  /** One of the workflow's experiments to rehearse: a copy of it runs on the rehearsal's calls. */
  readonly experiment_id?: number | undefined
}

export type Command =
  | { readonly type: "RUN_BATCH" }
  | { readonly type: "RESUME" }
  | { readonly type: "STOP" }
  | { readonly type: "ANSWER"; readonly questionId: number }

const notFound = (id: number) => new NotFound({ message: `simulation campaign ${id} not found` })

const stateConflict = (state: SimCampaignState, command: string) =>
  new Conflict({
    code: "SIM_CAMPAIGN_STATE",
    message: `the campaign is ${state}: ${command} is not possible now`,
    details: { state },
  })

const limitConflict = () =>
  new Conflict({
    code: "SIM_CAMPAIGN_LIMIT",
    message: `at most ${MAX_ACTIVE_CAMPAIGNS} simulation campaigns may be active at once: stop one or let it finish`,
    details: { limit: MAX_ACTIVE_CAMPAIGNS },
  })

/** Best effort: runtime processes also find runs to claim and poll their status on their own. */
const notify = (messages: ReadonlyArray<readonly [string, RunControl]>) =>
  Effect.gen(function* () {
    for (const [subject, payload] of messages) yield* publishOrWarn(subject, payload, "runtime notification not sent")
  })

// --- creating ---------------------------------------------------------------------------------

export const createCampaign = (caller: Principal, input: StartInput) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const config = yield* AppConfig
    const tenantId = caller.tenantId
    const w = yield* Effect.promise(() => findWorkflowDetail(sql, tenantId, input.workflow_id))
    if (w === undefined || w.archived_at !== null)
      return yield* Effect.fail(new NotFound({ message: `workflow ${input.workflow_id} not found` }))
    if (w.status === "retired")
      return yield* Effect.fail(
        new Conflict({
          code: "WORKFLOW_RETIRED",
          message: `workflow ${w.id} is retired: there is nothing to rehearse`,
        }),
      )
    if (w.rule_book_id === null || w.rule_book === null)
      return yield* Effect.fail(
        new Conflict({
          code: "WORKFLOW_NOT_READY",
          message: `workflow ${w.id} has no rule book to rehearse`,
          details: { missing: ["rule_book"] },
        }),
      )
    const tenant = (yield* Effect.promise(() => findTenantContext(sql, tenantId)))!
    const valid = validateRuleBook(w.rule_book, { currency: tenant.currency, planTier: tenant.plan_tier })
    if (!valid.ok)
      return yield* Effect.fail(
        new RuleBookInvalid({ message: `workflow ${w.id}'s rule book is not valid`, errors: valid.errors }),
      )

    const rehearsed =
      input.experiment_id === undefined
        ? undefined
        : yield* Effect.promise(() => findExperiment(sql, tenantId, w.id, input.experiment_id!))
    if (input.experiment_id !== undefined && rehearsed === undefined)
      return yield* Effect.fail(
        new ValidationFailed({
          message: "experiment_id is not an experiment of this workflow",
          errors: [{ field: "experiment_id", message: "is not an experiment of this workflow" }],
        }),
      )
    const size = input.size ?? DEFAULT_SIZE
    const batchSize = input.batch_size ?? DEFAULT_BATCH_SIZE
    const mix = input.mix ?? DEFAULT_SIM_MIX
    const seed = input.seed ?? Math.floor(Math.random() * (MAX_SEED + 1))
    const callees = drawCallees(seed, size, mix)
    const ruleBookId = w.rule_book_id
    const created = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        await repo.lockTenantCampaigns(tx, tenantId)
        if ((await repo.countActive(tx, tenantId)) >= MAX_ACTIVE_CAMPAIGNS) return undefined
        const simWorkflowId = await insertSimulationWorkflow(tx, {
          tenantId,
          ofWorkflowId: w.id,
          ruleBookId,
          name: `Simulation of ${w.name}`.slice(0, 200),
        })
        await insertSimulatedTargets(tx, { tenantId, workflowId: simWorkflowId, callees })
        // The experiment rehearsed runs on the rehearsal's own workflow: the same arms, the same seed.
        if (rehearsed !== undefined)
          await insertExperiment(tx, {
            tenantId,
            workflowId: simWorkflowId,
            name: rehearsed.name,
            seed: rehearsed.seed,
            arms: rehearsed.arms,
            userId: caller.kind === "user" ? caller.userId : null,
            rehearses: rehearsed.id,
          })
        const run = await insertHeldRun(tx, tenantId, simWorkflowId, ruleBookId)
        const row = await repo.insertCampaign(tx, {
          tenantId,
          workflowId: w.id,
          simWorkflowId,
          runId: run.id,
          size,
          batchSize,
          seed,
          timeScale: input.time_scale ?? null,
          mix,
        })
        await renameSimulationWorkflow(tx, simWorkflowId, `Simulation ${row.id} of ${w.name}`.slice(0, 200))
        return viewOf(tx, row, "ready", capacityOf(config))
      }),
    )
    if (created === undefined) return yield* Effect.fail(limitConflict())
    // No wake-up: every callee is held, so there is nothing to dial before the first run-batch
    // (which wakes the runtime); until then any runtime process may claim the run on its rounds.
    return created
  })

// --- reconciling, reading and commanding ---------------------------------------------------------

interface Facts {
  readonly progress: { released: number; open: number; final: number }
  readonly run: Awaited<ReturnType<typeof runEndOf>>
  readonly questions: ReadonlyArray<repo.QuestionRow>
}

const readFacts = async (tx: Tx, c: repo.CampaignRow): Promise<Facts> => ({
  progress: await simulationProgress(tx, c.run_id),
  run: await runEndOf(tx, c.run_id),
  questions: await repo.heldQuestions(tx, c.run_id),
})

const snapshotOf = (machine: CampaignMachinePort, c: repo.CampaignRow, state: SimCampaignState, released: number) =>
  machine.snapshot(state, { campaignId: c.id, size: c.size, batchSize: c.batch_size, released })

/** What Postgres says happened, as the machine's fact events (each sent only where accepted). */
export function factEvents(size: number, f: Facts): SimCampaignEvent[] {
  const events: SimCampaignEvent[] = []
  if (f.progress.final >= size) events.push({ type: "ALL_DONE" })
  if (f.run.status === "failed" || f.run.status === "cancelled")
    events.push({ type: "FAILED", reason: `run ${f.run.status}${f.run.end_reason ? `: ${f.run.end_reason}` : ""}` })
  else if (f.run.status === "completed" && f.progress.final < size)
    events.push({ type: "FAILED", reason: "run completed before every simulated callee had an outcome" })
  const first = f.questions[0]
  events.push(first === undefined ? { type: "QUESTION_ANSWERED" } : { type: "QUESTION_ASKED", questionId: first.id })
  if (f.progress.open === 0 && first === undefined) events.push({ type: "BATCH_DONE" })
  return events
}

const reconcile = (machine: CampaignMachinePort, snapshot: SimCampaignSnapshot, size: number, f: Facts) => {
  let s = snapshot
  let failure: string | null = null
  for (const e of factEvents(size, f)) {
    if (!s.can(e)) continue
    s = machine.transition(s, e)[0]
    if (e.type === "FAILED") failure = e.reason
  }
  return { snapshot: s, failure }
}

type Outcome =
  | { readonly ok: true; readonly view: CampaignView; readonly notify: Array<readonly [string, RunControl]> }
  | { readonly ok: false; readonly error: Conflict | NotFound }

/**
 * Under the campaign's row lock: reconcile with the run, apply `command` (when given) and the
 * actions the machine emits for it, reconcile again, save, and read the campaign back.
 */
const transact = (tenantId: number, id: number, command: Command | undefined) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const machine = yield* CampaignMachine
    const capacity = capacityOf(yield* AppConfig)
    const outcome = yield* Effect.promise(
      () =>
        sql.begin(async (tx): Promise<Outcome> => {
          const c = await repo.lockCampaign(tx, tenantId, id)
          if (c === undefined) return { ok: false, error: notFound(id) }
          let facts = await readFacts(tx, c)
          let { snapshot, failure } = reconcile(
            machine,
            snapshotOf(machine, c, c.state, facts.progress.released),
            c.size,
            facts,
          )
          const messages: Array<readonly [string, RunControl]> = []
          const save = async () => {
            const state = machine.stateOf(snapshot)
            const saved = await repo.saveCampaign(tx, c.id, {
              state,
              released: facts.progress.released,
              failure: failure ?? c.failure,
            })
            return viewOf(tx, saved, state, capacity, facts.questions)
          }
          if (command !== undefined) {
            const event = eventOf(command, facts)
            if (!snapshot.can(event)) {
              const view = await save()
              return { ok: false, error: stateConflict(view.state, commandName(command)) }
            }
            if (command.type === "RESUME") {
              await repo.lockTenantCampaigns(tx, tenantId)
              if ((await repo.countActive(tx, tenantId)) >= MAX_ACTIVE_CAMPAIGNS) {
                await save()
                return { ok: false, error: limitConflict() }
              }
            }
            const [next, actions] = machine.transition(snapshot, event)
            for (const a of actions) {
              const run: RunControl = { run_id: c.run_id, tenant_id: tenantId, command: "resume" }
              if (a.type === "releaseBatch") {
                await releaseHeldTargets(tx, c.run_id, (a.params as { count: number }).count)
                // A stopped campaign's run was paused: it runs again (a no-op when it is running).
                await resumeRun(tx, c.run_id)
                // WAKE: any process claims the run if nobody owns it; CONTROL: its owner dials at once.
                messages.push([RT_RUN_WAKE, run], [RT_RUN_CONTROL, run])
              } else if (a.type === "stopDialing") {
                await holdUndialedTargets(tx, c.run_id)
                if (await pauseSimulationRun(tx, c.run_id))
                  messages.push([RT_RUN_CONTROL, { ...run, command: "pause" }])
              }
            }
            facts = await readFacts(tx, c)
            ;({ snapshot, failure } = reconcile(
              machine,
              snapshotOf(machine, c, machine.stateOf(next), facts.progress.released),
              c.size,
              facts,
            ))
          }
          return { ok: true, view: await save(), notify: messages }
        }) as Promise<Outcome>,
    )
    if (!outcome.ok) return yield* Effect.fail(outcome.error)
    yield* notify(outcome.notify)
    return outcome.view
  })

const eventOf = (command: Command, facts: Facts): SimCampaignEvent =>
  command.type === "RESUME" ? { type: "RESUME", inFlight: facts.progress.open > 0 } : command

const commandName = (command: Command): string =>
  ({ RUN_BATCH: "run-batch", RESUME: "resume", STOP: "stop", ANSWER: "answer" })[command.type]

const capacityOf = (config: {
  dialer: { maxConcurrentPerWorkflow: number; cpsPerTenant: number; cpsPerCarrier: number }
}) =>
  ({
    concurrency: config.dialer.maxConcurrentPerWorkflow,
    callsPerSecond: Math.min(config.dialer.cpsPerTenant, config.dialer.cpsPerCarrier),
  }) satisfies DialingCapacity

/** The campaign as the API shows it, read inside the caller's transaction. */
async function viewOf(
  tx: Tx,
  c: repo.CampaignRow,
  state: SimCampaignState,
  capacity: DialingCapacity,
  questions?: ReadonlyArray<repo.QuestionRow>,
): Promise<CampaignView> {
  const [progress, outcomes, stats, held, rehearsed, currency, experiments] = [
    await simulationProgress(tx, c.run_id),
    await finalOutcomeCounts(tx, c.run_id),
    await repo.runStats(tx, c.run_id),
    questions ?? (await repo.heldQuestions(tx, c.run_id)),
    await findWorkflowDetail(tx, c.tenant_id, c.workflow_id),
    await repo.tenantCurrency(tx, c.tenant_id),
    await listExperiments(tx, c.tenant_id, c.sim_workflow_id, 1),
  ]
  const sample = sampleOf(outcomes, stats)
  return campaignView(c, state, {
    progress,
    outcomes,
    stats,
    questions: held,
    experiment: experiments[0] === undefined ? null : await experimentView(tx, experiments[0]),
    forecast: forecast({
      sample,
      audience: rehearsed?.audience_count ?? 0,
      currency,
      capacity,
    }),
  })
}

export const getCampaign = (tenantId: number, id: number) => transact(tenantId, id, undefined)

/** The workspace's campaigns, newest first, each reconciled as GET one does. */
export const listCampaigns = (tenantId: number, opts: { limit: number; beforeId: number | undefined }) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const ids = yield* Effect.promise(() => repo.listCampaigns(sql, tenantId, opts.limit, opts.beforeId))
    const campaigns: CampaignView[] = []
    for (const { id } of ids)
      campaigns.push(yield* transact(tenantId, id, undefined).pipe(Effect.catchTag("NotFound", Effect.die)))
    return { campaigns, active_limit: MAX_ACTIVE_CAMPAIGNS }
  })

/**
 * POST run-batch: releases the next batch_size callees to the campaign's run (202; the runtime
 * dials them). Refused unless ready with callees left.
 */
export const runBatch = (tenantId: number, id: number) => transact(tenantId, id, { type: "RUN_BATCH" })

/** POST resume: a stopped campaign is active again (ready, or running while conversations are in flight). */
export const resumeCampaign = (tenantId: number, id: number) => transact(tenantId, id, { type: "RESUME" })

/** POST stop: nothing more is released; conversations in flight finish. Idempotent once stopped. */
export const stopCampaign = (tenantId: number, id: number) => transact(tenantId, id, { type: "STOP" })

/**
 * POST answer: decides the pending question through the approvals service (the same conditional
 * update and rt.approval.decided as POST /api/approvals/{id}/decide), so the held conversation
 * continues. Checked first under the campaign's lock; the decision itself is the approvals'.
 */
export const answerQuestion = (
  caller: Principal,
  id: number,
  a: { question_id: number; decision: "approve" | "deny"; note: string | null },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const machine = yield* CampaignMachine
    const tenantId = caller.tenantId
    const command: Command = { type: "ANSWER", questionId: a.question_id }
    // Reconciled and checked: the state accepts an answer, and the question is this campaign's.
    const checked = yield* Effect.promise(
      () =>
        sql.begin(async (tx) => {
          const c = await repo.lockCampaign(tx, tenantId, id)
          if (c === undefined) return { error: notFound(id) }
          const facts = await readFacts(tx, c)
          const { snapshot, failure } = reconcile(
            machine,
            snapshotOf(machine, c, c.state, facts.progress.released),
            c.size,
            facts,
          )
          const state = machine.stateOf(snapshot)
          await repo.saveCampaign(tx, c.id, { state, released: facts.progress.released, failure: failure ?? c.failure })
          if (!snapshot.can(eventOf(command, facts))) return { error: stateConflict(state, "answer") }
          if (!(await repo.isQuestionOfRun(tx, c.run_id, a.question_id)))
            return { error: new NotFound({ message: `question ${a.question_id} not found in campaign ${id}` }) }
          return { error: undefined }
        }) as Promise<{ error: Conflict | NotFound | undefined }>,
    )
    if (checked.error !== undefined) return yield* Effect.fail(checked.error)
    const decided = yield* decideApproval(caller, a.question_id, a.decision, a.note)
    // The question is decided: reconciling moves the campaign on (running, or the next question).
    const campaign = yield* Effect.orDie(transact(tenantId, id, undefined))
    return {
      ...campaign,
      answered: { question_id: decided.id, status: decided.status, decided_at: decided.decided_at },
    }
  })
