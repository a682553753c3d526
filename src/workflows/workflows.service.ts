// Workflows (campaigns): creation from a plain-language prompt through the language model, the
// rule book's validated versions, settings, consent attestation, and retiring. Status changes are
// decided under the workflow's row lock, so they hold against a run starting at the same moment.
import { Cause, Effect } from "effect"
import { recordAudit } from "../audit/audit.repo.js"
import { ownerEmailVerified } from "../auth/auth.repo.js"
import { auditActorOf, type Principal, type UserPrincipal } from "../auth/principal.js"
import { listObjections } from "../objections/objections.repo.js"
import { Db, type Tx } from "../platform/Db.js"
import { Conflict, GatewayUnavailable, NotFound, RuleBookInvalid, ValidationFailed } from "../platform/errors.js"
import { Log } from "../platform/Log.js"
import { type ListPage, pageOf } from "../platform/page.cursor.js"
import { iso } from "../platform/time.js"
import { Llm } from "../providers/Llm.js"
import { LlmCallError } from "../providers/llm/llm.interface.js"
import { findVoice } from "../voices/voices.catalog.js"
import { readinessGaps, runBlock } from "./readiness.js"
import { generateRuleBook } from "./rulebook.prompt.js"
import { mergeRuleBook, type RuleBook, validateRuleBook } from "./rulebook.schema.js"
import { effectiveSchedule, RULE_BOOK_FIELDS, type WorkflowStatus, type WorkflowUpdate } from "./workflow.schema.js"
import type { TenantContext, WorkflowDetailRow } from "./workflows.repo.js"
import * as repo from "./workflows.repo.js"

/** The workflow as every endpoint shows it. */
export const workflowView = (w: WorkflowDetailRow) => ({
  id: w.id,
  tenant_id: w.tenant_id,
  name: w.name,
  status: w.status,
  persona: w.persona,
  schedule_kind: w.schedule_kind,
  schedule: effectiveSchedule(w.schedule),
  rule_book_id: w.rule_book_id,
  rule_book_version: w.rule_book_version,
  rule_book: w.rule_book,
  audience_count: w.audience_count,
  runs_count: w.runs_count,
  compliance: complianceView(w.compliance),
  nl_prompt: w.nl_prompt,
  is_test: w.is_test,
  author_user_id: w.author_user_id,
  created_at: iso(w.created_at),
  updated_at: iso(w.updated_at),
  retired_at: iso(w.retired_at),
  archived_at: iso(w.archived_at),
})
export type WorkflowView = ReturnType<typeof workflowView>

const complianceView = (c: Record<string, unknown>) => ({
  attested: typeof c["consent_attested_at"] === "string",
  consent_attestation_text: c["consent_attestation_text"] ?? null,
  tcpa_sender_id: c["tcpa_sender_id"] ?? null,
  dpdp_consent_method: c["dpdp_consent_method"] ?? null,
  consent_attested_by_user_id: c["consent_attested_by_user_id"] ?? null,
  consent_attested_at: c["consent_attested_at"] ?? null,
})

const notFound = (id: number) => new NotFound({ message: `workflow ${id} not found` })

const tenantContext = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* Effect.promise(() => repo.findTenantContext(sql, tenantId))
    if (tenant === undefined)
      return yield* Effect.dieMessage(`tenant ${tenantId} of an authenticated caller is missing`)
    return tenant
  })

/**
 * Asks the model for a rule book and validates it for this tenant. A persona the caller chose
 * wins over the model's, and the book's language follows that persona.
 */
const generate = (tenant: TenantContext, prompt: string, persona: string | undefined) =>
  Effect.gen(function* () {
    const llm = yield* Llm
    const log = yield* Log
    const objections = yield* listObjections(undefined)
    const raw = yield* Effect.tryPromise({
      try: () =>
        generateRuleBook(llm, {
          prompt,
          persona,
          currency: tenant.currency,
          country: tenant.country,
          planTier: tenant.plan_tier,
          objections,
        }),
      catch: (e) => e,
    }).pipe(
      Effect.catchAll((e) => {
        if (!(e instanceof LlmCallError)) return Effect.die(e)
        log.warn({ err: e, provider: llm.name }, "rule-book generation failed")
        return Effect.fail(
          new GatewayUnavailable({ message: `the language model could not write a rule book: ${e.message}` }),
        )
      }),
    )
    const book =
      persona !== undefined && isObject(raw)
        ? { ...raw, persona, language: findVoice(persona)?.language ?? raw["language"] }
        : raw
    return { book: yield* validated(book, tenant), model: llm.model }
  })

const validated = (book: unknown, tenant: TenantContext) => {
  const result = validateRuleBook(book, { currency: tenant.currency, planTier: tenant.plan_tier })
  return result.ok
    ? Effect.succeed(result.value)
    : Effect.fail(new RuleBookInvalid({ message: "the rule book failed validation", errors: result.errors }))
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** Runs `work` in a transaction holding the workflow's row lock; NotFound for another tenant's. */
const underLock = <A, E>(tenantId: number, id: number, work: (tx: Tx, w: WorkflowDetailRow) => Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    // postgres.js transactions are promise-scoped: the Effect runs inside, its failure rolls back.
    const outcome = yield* Effect.promise(() =>
      sql
        .begin(async (tx) => {
          const w = await repo.lockWorkflow(tx, tenantId, id)
          if (w === undefined) throw new Abort(Cause.fail(notFound(id)))
          const exit = await Effect.runPromiseExit(work(tx, w))
          if (exit._tag === "Failure") throw new Abort(exit.cause)
          return exit.value
        })
        .then(
          (value) => ({ ok: true as const, value: value as A }),
          (e: unknown) => {
            if (e instanceof Abort) return { ok: false as const, cause: e.cause as Cause.Cause<E | NotFound> }
            throw e
          },
        ),
    )
    if (outcome.ok) return outcome.value
    return yield* Effect.failCause(outcome.cause)
  })

/** Carries a failure out of a postgres.js transaction so it rolls back. */
class Abort {
  constructor(readonly cause: Cause.Cause<unknown>) {}
}

const refuseIf = (w: WorkflowDetailRow, statuses: ReadonlyArray<WorkflowStatus>, action: string) => {
  if (!statuses.includes(w.status)) return Effect.void
  return Effect.fail(
    w.status === "live"
      ? new Conflict({ code: "WORKFLOW_LIVE", message: `workflow ${w.id} is live: pause it before you ${action}` })
      : new Conflict({ code: "WORKFLOW_RETIRED", message: `workflow ${w.id} is retired and cannot change` }),
  )
}

const reload = (tx: Tx, tenantId: number, id: number) =>
  Effect.promise(async () => workflowView((await repo.findWorkflowDetail(tx, tenantId, id))!))

export interface CreateInput {
  readonly nl_prompt: string
  readonly persona_override?: string | undefined
  readonly is_test?: boolean | undefined
  readonly author_user_id?: string | undefined
}

const userIdOf = (p: Principal): number | null => (p.kind === "user" ? p.userId : null)

export const createWorkflow = (caller: Principal, input: CreateInput) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const tenant = yield* tenantContext(caller.tenantId)
    const { book, model } = yield* generate(tenant, input.nl_prompt, input.persona_override)
    const id = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        const id = await repo.insertWorkflow(tx, {
          kind: "campaign",
          tenantId: tenant.id,
          name: book.name,
          persona: book.persona,
          nlPrompt: input.nl_prompt,
          isTest: input.is_test ?? false,
          authorUserId: input.author_user_id ?? null,
          createdByUserId: userIdOf(caller),
        })
        await repo.insertRuleBookVersion(tx, {
          tenantId: tenant.id,
          workflowId: id,
          body: book,
          source: "generated",
          nlPrompt: input.nl_prompt,
          model,
          userId: userIdOf(caller),
        })
        return id
      }),
    )
    return yield* getWorkflow(tenant.id, id)
  })

/**
 * The workflow as GET /api/workflows/{id} shows it: with whether it may run (`readiness`: the run
 * gate's own predicate, readiness.ts, and what else POST run would refuse) and its latest
 * run's state, so a finished campaign reads as finished and a disabled Run says why.
 */
export const getWorkflow = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const w = yield* Effect.promise(() => repo.findWorkflowDetail(sql, tenantId, id))
    if (w === undefined) return yield* Effect.fail(notFound(id))
    const [verified, latest] = yield* Effect.promise(() =>
      Promise.all([ownerEmailVerified(sql, tenantId), repo.latestRun(sql, id)]),
    )
    const missing = readinessGaps(
      {
        rule_book_id: w.rule_book_id,
        audience_count: w.audience_count,
        attested: Object.hasOwn(w.compliance, "consent_attested_at"),
      },
      verified,
    )
    const blocked = runBlock(w)
    return {
      ...workflowView(w),
      readiness: {
        ready: missing.length === 0,
        missing,
        blocked_by: blocked,
        can_run: missing.length === 0 && !blocked,
      },
      latest_run:
        latest === null
          ? null
          : {
              ...latest,
              run_id: latest.id,
              started_at: iso(latest.started_at),
              ended_at: iso(latest.ended_at),
              finished: ["completed", "cancelled", "failed"].includes(latest.status),
            },
    }
  })

/** One page of workflows and the cursor of the next (null on the last page). */
export const listWorkflows = (
  tenantId: number,
  opts: { status: WorkflowStatus | undefined; includeArchived: boolean },
  page: ListPage,
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const { rows, next_cursor } = pageOf(
      yield* Effect.promise(() => repo.listWorkflows(sql, tenantId, opts, page)),
      page.limit,
    )
    const workflows = rows.map((r) => ({
      ...r,
      created_at: iso(r.created_at),
      updated_at: iso(r.updated_at),
      archived_at: iso(r.archived_at),
    }))
    return { workflows, next_cursor }
  })

/** Rule-book changes a PUT asks for: `rule_book` and the top-level rule-book keys, merged. */
const ruleBookPatch = (u: WorkflowUpdate): Record<string, unknown> | undefined => {
  const patch: Record<string, unknown> = { ...(u.rule_book ?? {}) }
  for (const k of RULE_BOOK_FIELDS) if (u[k] !== undefined) patch[k] = u[k]
  if (u.persona !== undefined) {
    patch["persona"] = u.persona
    // A new persona speaks its own language unless the same PUT says otherwise.
    if (patch["language"] === undefined) patch["language"] = findVoice(u.persona)?.language
  }
  return Object.keys(patch).length === 0 ? undefined : patch
}

export const updateWorkflow = (caller: Principal, id: number, u: WorkflowUpdate) =>
  Effect.gen(function* () {
    const tenant = yield* tenantContext(caller.tenantId)
    return yield* underLock(tenant.id, id, (tx, w) =>
      Effect.gen(function* () {
        yield* refuseIf(w, ["live", "retired"], "change it")
        const patch = ruleBookPatch(u)
        let persona = w.persona
        if (patch !== undefined) {
          if (w.rule_book === null) return yield* Effect.dieMessage(`workflow ${id} has no rule book`)
          const book = yield* validated(mergeRuleBook(w.rule_book, patch), tenant)
          persona = book.persona
          yield* Effect.promise(() =>
            repo.insertRuleBookVersion(tx, {
              tenantId: tenant.id,
              workflowId: id,
              body: book,
              source: "edited",
              nlPrompt: null,
              model: null,
              userId: userIdOf(caller),
            }),
          )
        }
        const schedule = u.schedule ?? w.schedule
        const scheduleKind = u.schedule_kind ?? w.schedule_kind
        if (scheduleKind === "once" && schedule.start_at === undefined)
          return yield* Effect.fail(
            new ValidationFailed({
              message: "schedule_kind once needs schedule.start_at",
              errors: [{ field: "schedule.start_at", message: "is required when schedule_kind is once" }],
            }),
          )
        yield* Effect.promise(() =>
          repo.updateWorkflowSettings(tx, id, {
            name: u.name ?? w.name,
            persona,
            scheduleKind,
            schedule,
            nlPrompt: w.nl_prompt,
          }),
        )
        return yield* reload(tx, tenant.id, id)
      }),
    )
  })

export const regenerateRuleBook = (caller: Principal, id: number, nlPrompt: string | undefined) =>
  Effect.gen(function* () {
    const tenant = yield* tenantContext(caller.tenantId)
    const { sql } = yield* Db
    // The model is asked outside the lock (it can take seconds); the status is checked again under it.
    const before = yield* Effect.promise(() => repo.findWorkflowDetail(sql, tenant.id, id))
    if (before === undefined) return yield* Effect.fail(notFound(id))
    yield* refuseIf(before, ["live", "retired"], "regenerate its rule book")
    const prompt = nlPrompt ?? before.nl_prompt
    const { book, model } = yield* generate(tenant, prompt, before.persona)
    return yield* underLock(tenant.id, id, (tx, w) =>
      Effect.gen(function* () {
        yield* refuseIf(w, ["live", "retired"], "regenerate its rule book")
        yield* Effect.promise(() =>
          repo.insertRuleBookVersion(tx, {
            tenantId: tenant.id,
            workflowId: id,
            // The operator's analysis fields are theirs, not the prompt's: a new book keeps them.
            body: w.rule_book?.analysis === undefined ? book : { ...book, analysis: w.rule_book.analysis },
            source: "generated",
            nlPrompt: prompt,
            model,
            userId: userIdOf(caller),
          }),
        )
        yield* Effect.promise(() =>
          repo.updateWorkflowSettings(tx, id, {
            name: w.name,
            persona: book.persona,
            scheduleKind: w.schedule_kind,
            schedule: w.schedule,
            nlPrompt: prompt,
          }),
        )
        return yield* reload(tx, tenant.id, id)
      }),
    )
  })

export interface ComplianceInput {
  readonly consent_attestation_text: string
  readonly tcpa_sender_id?: string | undefined
  readonly dpdp_consent_method?: string | undefined
}

/**
 * A signed-in user attests the audience's consent in their own words: the workflow keeps who, when
 * and the text, and the audit log keeps every attestation with the one it replaced.
 */
export const attestCompliance = (user: UserPrincipal, ip: string, id: number, input: ComplianceInput) =>
  underLock(user.tenantId, id, (tx, w) =>
    Effect.gen(function* () {
      yield* refuseIf(w, ["retired"], "attest consent")
      const attestation = {
        consent_attestation_text: input.consent_attestation_text,
        tcpa_sender_id: input.tcpa_sender_id ?? null,
        dpdp_consent_method: input.dpdp_consent_method ?? null,
        consent_attested_by_user_id: user.userId,
        consent_attested_at: new Date().toISOString(),
      }
      yield* Effect.promise(async () => {
        await repo.setCompliance(tx, id, attestation)
        await recordAudit(tx, auditActorOf(user, ip), {
          action: "compliance.attested",
          target: `workflow:${id}`,
          before: Object.keys(w.compliance).length === 0 ? undefined : w.compliance,
          after: attestation,
        })
      })
      return yield* reload(tx, user.tenantId, id)
    }),
  )

/** Retires (and with `archive`, soft-deletes) a workflow; refused while one of its runs is running. */
export const retire = (tenantId: number, id: number, opts: { archive: boolean }) =>
  underLock(tenantId, id, (tx, w) =>
    Effect.gen(function* () {
      if (w.running_run_id !== null)
        return yield* Effect.fail(
          new Conflict({
            code: "RUN_IN_PROGRESS",
            message: `workflow ${id} has run ${w.running_run_id} running: pause or finish it first`,
            details: { run_id: w.running_run_id },
          }),
        )
      yield* Effect.promise(() => repo.retireWorkflow(tx, id, opts.archive))
      return yield* reload(tx, tenantId, id)
    }),
  )

export type { RuleBook }
