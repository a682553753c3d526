// Post-call analysis of claimed calls: which model, one attempt at the answer, the agreed terms and the
// scheduled callback, the result stored once with its charge and call.analyzed event in one transaction;
// a failed attempt retried with backoff (one that would fail alike recorded at once). The worker drives it.
import type { Logger } from "pino"
import { postEntry } from "../billing/ledger.repo.js"
import { ANALYSIS_PER_CALL_MINOR } from "../billing/pricing.js"
import type { Config } from "../platform/config.js"
import type { Sql } from "../platform/Db.js"
import { iso } from "../platform/time.js"
import type { LanguageModel } from "../providers/llm/llm.interface.js"
import { emitEvents } from "../webhooks/outbox.repo.js"
import { AnalysisAttemptError, type AnalysisResult, analyseCall } from "./analysis.llm.js"
import * as repo from "./analysis.repo.js"
import { AnalysisSection, DEFAULT_ANALYSIS } from "./analysis.schema.js"

/** A call's transcript beyond this many turns is not read (the simulated callee stops far sooner). */
const TRANSCRIPT_MAX_TURNS = 400
/** The longest wait between attempts. */
const MAX_BACKOFF_MS = 10 * 60_000

export interface AnalysisDeps {
  readonly sql: Sql
  readonly log: Logger
  readonly config: Pick<Config, "analysis">
  /** This process's instance id: the lease holder's name. */
  readonly me: string
  /** The platform's model: LLM_BASE_URL's, else the simulator. */
  readonly platformLlm: LanguageModel
  /** The workspace's own model (a validated byok llm credential), or undefined: the platform's. */
  readonly ownLlm: (tenantId: number) => Promise<LanguageModel | undefined>
}

/** A stored analysis as the api, the results export and the call.analyzed event show it. */
export const analysisView = (r: repo.AnalysisRow) => ({
  call_id: r.call_id,
  run_id: r.run_id,
  status: r.status,
  summary: r.summary,
  goal_met: r.goal_met,
  sentiment: r.sentiment,
  callback_at: iso(r.callback_at),
  agreed_value_minor: r.agreed_value_minor,
  fields: r.fields,
  model: r.model,
  model_version: r.model_version,
  charged_minor: r.charged_minor,
  attempts: r.attempts,
  error: r.error,
  analyzed_at: iso(r.analyzed_at),
})

export type AttemptResult = "done" | "retry" | "failed" | "lost"

/** The delay before attempt `attempts + 1`: the base, doubling each attempt, at most MAX_BACKOFF_MS. */
export const backoffMs = (base: number, attempts: number): number =>
  Math.min(MAX_BACKOFF_MS, base * 2 ** Math.max(0, attempts - 1))

class WalletShort extends Error {}

/** One attempt at a claimed call's analysis; never rejects for the call's own reasons (they are recorded). */
export async function analyseClaimed(d: AnalysisDeps, claimed: repo.Claimed): Promise<AttemptResult> {
  return (await analyseBatch(d, [claimed]))[0]!
}

interface Answered {
  readonly done: repo.DoneAnalysis
  readonly tenantId: number
  /** A simulation campaign's call: stored, but no call.analyzed event (a rehearsal sends none). */
  readonly simulation: boolean
}

/**
 * One attempt at each claimed call's analysis, in the order claimed. The calls are read in one
 * statement, the models asked side by side, and the results stored in one transaction (their
 * charges and events with them), so a burst of hangups costs a few round trips per group rather
 * than per call. A wallet that cannot pay one charge sends the group back to one transaction per
 * call, so only that call's analysis fails.
 */
export async function analyseBatch(d: AnalysisDeps, claims: readonly repo.Claimed[]): Promise<AttemptResult[]> {
  const { sql } = d
  const results = new Map<number, AttemptResult>()
  const fail = async (claimed: repo.Claimed, reason: string, final: boolean): Promise<void> => {
    const last = final || claimed.attempts >= d.config.analysis.maxAttempts
    const retryAt = last ? null : new Date(Date.now() + backoffMs(d.config.analysis.retryBackoffMs, claimed.attempts))
    await repo.markAttemptFailed(sql, claimed.call_id, d.me, reason, retryAt)
    d.log.warn(
      { call_id: claimed.call_id, attempt: claimed.attempts, final: last, reason },
      "call analysis attempt failed",
    )
    results.set(claimed.call_id, last ? "failed" : "retry")
  }

  const live: repo.Claimed[] = []
  for (const c of claims) {
    // Claims that never reported back (their process died mid-attempt) count too: past the bound, stop.
    if (c.attempts > d.config.analysis.maxAttempts)
      await fail(c, `gave up after ${c.attempts - 1} attempts that did not finish`, true)
    else live.push(c)
  }
  const works = new Map(
    (
      await repo.loadCallWork(
        sql,
        live.map((c) => c.call_id),
        TRANSCRIPT_MAX_TURNS,
      )
    ).map((w) => [w.call_id, w]),
  )
  const owns = new Map<number, Promise<LanguageModel | undefined>>()
  const ownFor = (tenantId: number): Promise<LanguageModel | undefined> => {
    let own = owns.get(tenantId)
    if (own === undefined) owns.set(tenantId, (own = d.ownLlm(tenantId)))
    return own
  }
  const answered: Answered[] = []
  await Promise.all(
    live.map(async (claimed) => {
      const work = works.get(claimed.call_id)
      if (work === undefined) return fail(claimed, "the call no longer exists", true)
      let own: LanguageModel | undefined
      try {
        own = await ownFor(work.tenant_id)
      } catch (e) {
        return fail(claimed, `the workspace's language model could not be prepared: ${(e as Error).message}`, false)
      }
      const llm = own ?? d.platformLlm
      const book = work.rule_book ?? {}
      const parsedSection = AnalysisSection.safeParse(book["analysis"] ?? DEFAULT_ANALYSIS)
      // Rule books are validated when written; one that is not (edited by hand) gets the built-ins alone.
      const section = parsedSection.success ? parsedSection.data : DEFAULT_ANALYSIS
      let result: AnalysisResult
      try {
        result = await analyseCall(llm, {
          call: {
            phone: work.phone_e164,
            calleeName: work.callee_name,
            outcome: work.outcome,
            connectedSeconds: work.connected_seconds ?? 0,
            endedAt: work.ended_at,
            transcript: work.transcript,
          },
          goal: typeof book["goal"] === "string" ? book["goal"] : "",
          fields: section.fields,
          timeoutMs: d.config.analysis.timeoutMs,
        })
      } catch (e) {
        // One that would fail the same way again (a bad key, a refused schema) is recorded at once.
        if (e instanceof AnalysisAttemptError) return fail(claimed, e.message, !e.retryable)
        throw e
      }
      answered.push({
        tenantId: work.tenant_id,
        simulation: work.simulation,
        done: {
          callId: claimed.call_id,
          answer: result.answer,
          // When the runtime will call back, as it scheduled it (null: no callback was scheduled).
          callbackAt: work.callback_at,
          agreedValueMinor: work.concession_minor === null ? null : Number(work.concession_minor),
          model: llm.model,
          // The version the provider says answered (the model asked may be an alias of it).
          modelVersion: result.modelVersion,
          // The platform's model (the simulator stands for it) is metered; the workspace's own is
          // not, and neither is a call nobody pays for (a rehearsal, the public demo).
          chargedMinor: own === undefined && !work.free ? ANALYSIS_PER_CALL_MINOR[work.currency] : null,
        },
      })
    }),
  )

  /** Stores a group in one transaction; rejects with WalletShort (nothing stored) when a charge cannot be paid. */
  const store = (group: readonly Answered[]) =>
    sql.begin(async (tx) => {
      const rows = await repo.markDone(
        tx,
        d.me,
        group.map((a) => a.done),
      )
      if (rows.length === 0) return new Set<number>()
      // A rehearsal's analysis is stored like any other, but announced to nobody (as its call events).
      const rehearsals = new Set(group.filter((a) => a.simulation).map((a) => a.done.callId))
      await emitEvents(
        tx,
        rows
          .filter((row) => !rehearsals.has(row.call_id))
          .map((row) => ({ tenantId: row.tenant_id, type: "call.analyzed" as const, data: analysisView(row) })),
      )
      // The charges last: ledger_post locks a workspace's wallet row until the commit, and every
      // analysis of the workspace waits on that lock. In workspace order, so two groups never wait
      // on each other in a cycle.
      const charged = rows
        .filter((row) => row.charged_minor !== null)
        .sort((x, y) => x.tenant_id - y.tenant_id || x.call_id - y.call_id)
      for (const row of charged) {
        const posted = await postEntry(tx, {
          tenantId: row.tenant_id,
          amountMinor: -row.charged_minor!,
          kind: "call_analysis",
          reference: `call:${row.call_id}`,
          idempotencyKey: `analysis:${row.call_id}`,
        })
        if (!posted.ok) throw new WalletShort(String(row.call_id))
      }
      return new Set(rows.map((row) => row.call_id))
    }) as Promise<Set<number>>

  const storeOrFail = async (group: readonly Answered[]): Promise<void> => {
    try {
      const stored = await store(group)
      for (const a of group) results.set(a.done.callId, stored.has(a.done.callId) ? "done" : "lost")
    } catch (e) {
      if (!(e instanceof WalletShort)) throw e
      if (group.length > 1) {
        for (const a of group) await storeOrFail([a])
        return
      }
      const a = group[0]!
      const claimed = live.find((c) => c.call_id === a.done.callId)!
      const currency = works.get(a.done.callId)?.currency ?? ""
      await fail(
        claimed,
        `the wallet cannot pay for the analysis (${a.done.chargedMinor} ${currency} minor units)`,
        true,
      )
    }
  }
  if (answered.length > 0) await storeOrFail(answered)
  return claims.map((c) => results.get(c.call_id) ?? "lost")
}
