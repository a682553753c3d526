// Knowledge-base rules by hand and by file: create, list, read, change, archive, export, import.
// Every change is recorded for the timeline in its own transaction and announced after it commits.
import { Effect } from "effect"
import { Clock } from "../platform/Clock.js"
import { Db, isUniqueViolation, type Sql } from "../platform/Db.js"
import { Conflict, ImportInvalid, NotFound, ValidationFailed } from "../platform/errors.js"
import { pageOf } from "../platform/page.cursor.js"
import * as repo from "./kb.repo.js"
import type { CreateRuleInput, UpdateRuleInput } from "./rule.schema.js"
import { ruleJson } from "./rule.view.js"
import { announceRulesChanged } from "./rules.changed.js"
import { type ImportFormat, type ImportRow, type RowError, readImport, rulesCsv, rulesJson } from "./rules.import.js"

export const IMPORT_MODES = ["merge", "replace"] as const
export type ImportMode = (typeof IMPORT_MODES)[number]

const notFound = (id: number) => new NotFound({ message: `rule ${id} not found` })

const noSuchWorkflow = () =>
  new ValidationFailed({
    message: "workflow_id: no such workflow in this workspace",
    errors: [{ field: "workflow_id", message: "no such workflow in this workspace" }],
  })

/** Rules as JSON with the feedback each was learnt from. */
async function withFeedback(sql: Sql, rows: ReadonlyArray<repo.RuleRow>) {
  const links = await repo.feedbackIdsOf(
    sql,
    rows.map((r) => r.id),
  )
  return rows.map((r) => ruleJson(r, links.get(r.id) ?? []))
}

/** Fails unless `workflowId` (when given) is one of the workspace's workflows. */
const checkWorkflow = (sql: Sql, tenantId: number, workflowId: number | null | undefined) =>
  workflowId === null || workflowId === undefined
    ? Effect.void
    : Effect.flatMap(
        Effect.promise(() => repo.liveWorkflowIds(sql, tenantId, [workflowId])),
        (live) => (live.has(workflowId) ? Effect.void : Effect.fail(noSuchWorkflow())),
      )

/**
 * Tells the runtime which workflows' rules changed: each one once, or the whole workspace (null)
 * when a workspace-wide rule changed or too many workflows did to name them one by one.
 */
const announce = (tenantId: number, workflowIds: Iterable<number | null>) =>
  Effect.gen(function* () {
    const ids = new Set(workflowIds)
    if (ids.size === 0) return
    if (ids.has(null) || ids.size > 20) return yield* announceRulesChanged(tenantId, null)
    for (const id of ids) yield* announceRulesChanged(tenantId, id)
  })

export const createRule = (tenantId: number, input: CreateRuleInput, actor: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    yield* checkWorkflow(sql, tenantId, input.workflow_id)
    const now = clock.now()
    const row = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        const [row] = await repo.insertRules(tx, tenantId, [{ ...input, source_kind: "manual" }], now)
        await repo.recordEvents(
          tx,
          tenantId,
          [
            {
              workflow_id: row!.workflow_id,
              action: "rule_created",
              rule_id: row!.id,
              detail: { bucket: row!.bucket, title: row!.title, status: row!.status, actor },
            },
          ],
          now,
        )
        return row!
      }),
    )
    yield* announce(tenantId, [row.workflow_id])
    return ruleJson(row, [])
  })

/** A page of rules, newest first, and the cursor of the next page (null on the last). */
export const listRules = (tenantId: number, filter: repo.RuleFilter) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    return yield* Effect.promise(async () => {
      const page = pageOf(await repo.listRules(sql, tenantId, { ...filter, limit: filter.limit + 1 }), filter.limit)
      return { rules: await withFeedback(sql, page.rows), next_cursor: page.next_cursor }
    })
  })

export const getRule = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const row = yield* Effect.promise(() => repo.findRule(sql, tenantId, id))
    if (row === undefined) return yield* Effect.fail(notFound(id))
    return (yield* Effect.promise(() => withFeedback(sql, [row])))[0]!
  })

/** Changes the fields given; status archived archives the rule, active or paused restores it. */
export const updateRule = (tenantId: number, id: number, patch: UpdateRuleInput, actor: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    yield* checkWorkflow(sql, tenantId, patch.workflow_id)
    const now = clock.now()
    const outcome = yield* Effect.promise(() =>
      sql
        .begin(async (tx) => {
          const before = await repo.findRule(tx, tenantId, id)
          if (before === undefined) return { kind: "missing" as const }
          const after = (await repo.updateRule(tx, tenantId, id, patch, now))!
          const changed = Object.keys(patch).filter((k) => patch[k as keyof UpdateRuleInput] !== undefined)
          const archiving = after.status === "archived" && before.status !== "archived"
          await repo.recordEvents(
            tx,
            tenantId,
            [
              {
                workflow_id: after.workflow_id,
                action: archiving ? "rule_archived" : "rule_updated",
                rule_id: id,
                detail: {
                  bucket: after.bucket,
                  title: after.title,
                  fields: changed,
                  actor,
                  ...(before.status !== after.status && { status_from: before.status, status_to: after.status }),
                },
              },
            ],
            now,
          )
          return { kind: "updated" as const, before, after }
        })
        .catch((e: unknown) => {
          // Restoring or moving a learnt rule onto a line that already has a live learnt rule.
          if (isUniqueViolation(e, "kb_rules_learnt_idx")) return { kind: "duplicate" as const }
          throw e
        }),
    )
    if (outcome.kind === "missing") return yield* Effect.fail(notFound(id))
    if (outcome.kind === "duplicate")
      return yield* Effect.fail(
        new Conflict({
          code: "CONFLICT",
          message: `rule ${id}: another live rule was already learnt from the same line for that workflow`,
        }),
      )
    yield* announce(tenantId, [outcome.before.workflow_id, outcome.after.workflow_id])
    return (yield* Effect.promise(() => withFeedback(sql, [outcome.after])))[0]!
  })

/** DELETE: archives the rule (it stays on record); an archived or unknown rule is 404. */
export const archiveRule = (tenantId: number, id: number, actor: string) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const now = clock.now()
    const row = yield* Effect.promise(() =>
      sql.begin(async (tx) => {
        const row = await repo.archiveRule(tx, tenantId, id, now)
        if (row !== undefined)
          await repo.recordEvents(
            tx,
            tenantId,
            [
              {
                workflow_id: row.workflow_id,
                action: "rule_archived",
                rule_id: id,
                detail: { bucket: row.bucket, title: row.title, actor },
              },
            ],
            now,
          )
        return row
      }),
    )
    if (row === undefined) return yield* Effect.fail(notFound(id))
    yield* announce(tenantId, [row.workflow_id])
    return (yield* Effect.promise(() => withFeedback(sql, [row])))[0]!
  })

// --- files ----------------------------------------------------------------------------------------

export const exportRules = (tenantId: number, format: ImportFormat, includeArchived: boolean) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const rows = yield* Effect.promise(() => repo.exportRules(sql, tenantId, includeArchived))
    const date = clock.now().toISOString().slice(0, 10)
    return format === "csv"
      ? { filename: `kb-rules-${date}.csv`, contentType: "text/csv; charset=utf-8", body: rulesCsv(rows) }
      : { filename: `kb-rules-${date}.json`, contentType: "application/json", body: rulesJson(rows) }
  })

export type ImportOutcome =
  | { readonly ok: false; readonly errors: ReadonlyArray<RowError> }
  | {
      readonly ok: true
      readonly dryRun: boolean
      readonly created: number
      readonly archived: number
      /** The workflows whose rules changed (null: workspace-wide rules). */
      readonly workflowIds: ReadonlyArray<number | null>
    }

/**
 * The whole import without the bus: read and check every row, check the workflows they name,
 * then (unless a dry run) archive the buckets being replaced and insert every rule in one
 * transaction. Any error anywhere: nothing is written. The bench calls this directly.
 */
export async function runImport(
  sql: Sql,
  tenantId: number,
  file: { format: ImportFormat; raw: Buffer },
  opts: { mode: ImportMode; dryRun: boolean; now: Date; actor?: string },
): Promise<ImportOutcome> {
  const read = await readImport(file.format, file.raw)
  if (!read.ok) return read
  const errors = await unknownWorkflows(sql, tenantId, read.rows)
  if (errors.length > 0) return { ok: false, errors }
  const rules = read.rows.map((r) => ({ ...r.rule, source_kind: "import" as const }))
  const buckets = opts.mode === "replace" ? [...new Set(rules.map((r) => r.bucket))] : []
  if (opts.dryRun) {
    const live = await repo.liveRulesInBuckets(sql, tenantId, buckets)
    return { ok: true, dryRun: true, created: rules.length, archived: live.length, workflowIds: [] }
  }
  return sql.begin(async (tx) => {
    const archived = await repo.archiveBuckets(tx, tenantId, buckets, opts.now)
    const created = await repo.insertRules(tx, tenantId, rules, opts.now)
    await repo.recordEvents(
      tx,
      tenantId,
      [
        {
          workflow_id: null,
          action: "rules_imported",
          detail: {
            format: file.format,
            mode: opts.mode,
            created: created.length,
            archived: archived.length,
            buckets: [...new Set(rules.map((r) => r.bucket))].slice(0, 50),
            ...(opts.actor !== undefined && { actor: opts.actor }),
          },
        },
      ],
      opts.now,
    )
    const workflowIds = [...new Set([...archived, ...created].map((r) => r.workflow_id))]
    return { ok: true as const, dryRun: false, created: created.length, archived: archived.length, workflowIds }
  }) as Promise<ImportOutcome>
}

/** A row naming a workflow that is not one of the workspace's: an error on its workflow_id. */
async function unknownWorkflows(sql: Sql, tenantId: number, rows: ReadonlyArray<ImportRow>): Promise<RowError[]> {
  const named = [...new Set(rows.flatMap((r) => (r.rule.workflow_id === null ? [] : [r.rule.workflow_id])))]
  if (named.length === 0) return []
  const live = await repo.liveWorkflowIds(sql, tenantId, named)
  return rows
    .filter((r) => r.rule.workflow_id !== null && !live.has(r.rule.workflow_id))
    .map((r) => ({ row: r.row, field: "workflow_id", message: "no such workflow in this workspace" }))
}

/**
 * POST /kb/import. Invalid: 422 IMPORT_INVALID listing every error, or for a dry run the same
 * errors in a 200 answer; either way nothing is written.
 */
export const importRules = (
  tenantId: number,
  file: { format: ImportFormat; raw: Buffer },
  opts: { mode: ImportMode; dryRun: boolean; actor: string },
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const outcome = yield* Effect.promise(() => runImport(sql, tenantId, file, { ...opts, now: clock.now() }))
    if (!outcome.ok) {
      if (opts.dryRun) return { would_create: 0, would_archive: 0, errors: outcome.errors }
      const first = outcome.errors[0]!
      const more = outcome.errors.length > 1 ? ` (and ${outcome.errors.length - 1} more)` : ""
      return yield* Effect.fail(
        new ImportInvalid({
          message: `import rejected, nothing written: row ${first.row} ${first.field}: ${first.message}${more}`,
          errors: outcome.errors,
        }),
      )
    }
    if (outcome.dryRun) return { would_create: outcome.created, would_archive: outcome.archived, errors: [] }
    yield* announce(tenantId, outcome.workflowIds)
    return { created: outcome.created, archived: outcome.archived }
  })
