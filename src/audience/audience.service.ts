// Attaching an audience to a workflow: rows are read as they arrive (CSV stream or JSON),
// normalised and staged in batches, then filtered (DNC, national registry, cool-down),
// de-duplicated and merged in one short transaction; a failed attach changes no target.
import type { Readable } from "node:stream"
import { Effect } from "effect"
import { COOLDOWN_MS } from "../compliance/dnc.service.js"
import { erasedAmong } from "../erasure/suppression.js"
import { CsvFormatError } from "../phones/csv.js"
import type { TenantCountry } from "../phones/phone.js"
import { Clock } from "../platform/Clock.js"
import { Db, type Sql } from "../platform/Db.js"
import { Conflict, type DomainError, NotFound, ValidationFailed } from "../platform/errors.js"
import {
  BATCH_SIZE,
  type BatchSink,
  type InvalidRow,
  type JsonAudienceRow,
  type ParseTally,
  parseAudienceCsv,
  parseAudienceJson,
} from "./audience.parse.js"
import * as repo from "./audience.repo.js"

/** An upload still "receiving" after this long belongs to a process that died. */
const ABANDONED_AFTER_MS = 24 * 3_600_000

export interface AttachResult {
  readonly accepted: number
  readonly rejected_dnc: number
  readonly rejected_ncpr: number
  readonly rejected_cooldown: number
  /** Numbers of data subjects erased from the workspace (POST /dsr/erase). */
  readonly rejected_erased: number
  readonly rejected_invalid: number
  readonly total_targets: number
  readonly duplicates: number
  readonly invalid_rows: ReadonlyArray<InvalidRow>
  readonly upload_id: number
}

export interface Attacher {
  readonly tenantId: number
  readonly userId: number | null
}

/**
 * Where the rows come from. `csv` opens the stream only once the workflow is known to take an
 * audience (so a 404 reads none of the body); a failure of the stream itself (too large,
 * malformed form, client gone) is thrown by it as it is.
 */
export type AudienceSource =
  | { readonly kind: "json"; readonly rows: ReadonlyArray<JsonAudienceRow> }
  | { readonly kind: "csv"; readonly open: () => Promise<Readable | AsyncIterable<Buffer | string> | undefined> }

type Ingested =
  | { readonly ok: true; readonly result: AttachResult }
  | { readonly ok: false; readonly error: DomainError }

const fileError = (message: string) => new ValidationFailed({ message, errors: [{ field: "file", message }] })

/** The workflow must be the tenant's, not deleted and not retired. */
export const checkAttachable = (tenantId: number, workflowId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const target = yield* Effect.promise(() => repo.attachTarget(sql, tenantId, workflowId))
    if (target === undefined || target.archived)
      return yield* Effect.fail(new NotFound({ message: `workflow ${workflowId} not found` }))
    if (target.status === "retired")
      return yield* Effect.fail(
        new Conflict({ code: "WORKFLOW_RETIRED", message: `workflow ${workflowId} is retired and takes no audience` }),
      )
    return target
  })

/**
 * The whole attach as one promise. Staging rows are written as batches arrive, each its own
 * short statement (no transaction is open while the client is still sending); whatever ends
 * the attach early, the finally block deletes them and marks the upload failed.
 */
async function ingest(
  sql: Sql,
  a: {
    tenantId: number
    workflowId: number
    uploadId: number
    country: TenantCountry
    source: AudienceSource
    now: () => Date
  },
): Promise<Ingested> {
  let applied = false
  // One staging insert in flight while the next batch is parsed (two batches in memory at most).
  let staging: Promise<void> = Promise.resolve()
  try {
    const sink: BatchSink = {
      batchSize: BATCH_SIZE,
      onBatch: async (rows) => {
        await staging
        staging = repo.stage(sql, a.uploadId, rows)
        staging.catch(() => undefined) // awaited before the next batch or at the end; not unhandled meanwhile
      },
    }
    let tally: ParseTally
    if (a.source.kind === "json") tally = await parseAudienceJson(a.source.rows, a.country, sink)
    else {
      const input = await a.source.open()
      if (input === undefined)
        return { ok: false, error: fileError("the form has no file part: send the CSV as a file") }
      try {
        tally = await parseAudienceCsv(input, a.country, sink)
      } catch (e) {
        if (e instanceof CsvFormatError) return { ok: false, error: fileError(e.message) }
        throw e
      }
    }
    await staging
    const now = a.now()
    const outcome = await repo.merge(sql, {
      tenantId: a.tenantId,
      workflowId: a.workflowId,
      uploadId: a.uploadId,
      cooldownSince: new Date(now.getTime() - COOLDOWN_MS),
      now,
      extra: { rows: tally.rows, rejected_invalid: tally.invalid },
      erased: await erasedAmong(sql, a.tenantId, "phone", await repo.stagedPhones(sql, a.uploadId)),
    })
    if (outcome.kind === "gone")
      return { ok: false, error: new NotFound({ message: `workflow ${a.workflowId} not found` }) }
    if (outcome.kind === "retired")
      return {
        ok: false,
        error: new Conflict({
          code: "WORKFLOW_RETIRED",
          message: `workflow ${a.workflowId} was retired during the upload`,
        }),
      }
    applied = true
    const c = outcome.counts
    return {
      ok: true,
      result: {
        accepted: c.accepted,
        rejected_dnc: c.rejected_dnc,
        rejected_ncpr: c.rejected_ncpr,
        rejected_cooldown: c.rejected_cooldown,
        rejected_erased: c.rejected_erased,
        rejected_invalid: tally.invalid,
        total_targets: c.total_targets,
        duplicates: c.duplicates,
        invalid_rows: tally.invalidRows,
        upload_id: a.uploadId,
      },
    }
  } finally {
    // Best effort: an unreachable database already fails the request; the staging table is
    // unlogged and sweepAbandoned catches what is left.
    if (!applied) {
      // A staging insert still running on another connection must land before the delete.
      await staging.catch(() => undefined)
      await repo.discard(sql, a.uploadId, a.now()).catch(() => undefined)
    }
  }
}

/**
 * Attaches rows to a workflow's audience. The failure of `run` — the upload's own errors
 * (PayloadTooLarge, BadRequestBody), ClientGone — is left to the caller (api/upload.ts's
 * readingUpload turns it into the right answer).
 */
export const attachAudience = (
  who: Attacher,
  workflowId: number,
  source: AudienceSource,
  run: <A>(work: () => Promise<A>) => Effect.Effect<A, DomainError>,
) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const clock = yield* Clock
    const target = yield* checkAttachable(who.tenantId, workflowId)
    const now = clock.now()
    yield* Effect.promise(() => repo.sweepAbandoned(sql, new Date(now.getTime() - ABANDONED_AFTER_MS), now))
    const uploadId = yield* Effect.promise(() =>
      repo.openUpload(sql, { tenantId: who.tenantId, workflowId, format: source.kind, userId: who.userId, now }),
    )
    const done = yield* run(() =>
      ingest(sql, {
        tenantId: who.tenantId,
        workflowId,
        uploadId,
        country: target.country,
        source,
        now: () => clock.now(),
      }),
    )
    if (!done.ok) return yield* Effect.fail(done.error)
    return done.result
  })
