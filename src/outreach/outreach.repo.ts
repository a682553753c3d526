// Outreach's reads: the call a patch-in names, within the workspace.
import type { Sql } from "../platform/Db.js"

export interface PatchInCall {
  readonly id: number
  readonly run_id: number
  readonly status: string
  readonly outcome: string | null
}

/** The workspace's call by id (another workspace's is not found). */
export const callOfTenant = async (sql: Sql, tenantId: number, callId: number): Promise<PatchInCall | undefined> =>
  (
    await sql<PatchInCall[]>`
      select id, run_id, status, outcome from calls where id = ${callId} and tenant_id = ${tenantId}`
  )[0]

export interface OutreachSource {
  readonly id: number
  readonly status: string
  readonly rule_book_id: number | null
  readonly attested: boolean
}

/**
 * The workflow an outreach call follows: the one named (the workspace's, not a simulation), or by
 * default the workspace's most recently updated callable one (live first; not retired, with a rule
 * book and a consent attestation; never an earlier outreach call's copy).
 */
export const outreachSource = async (
  sql: Sql,
  tenantId: number,
  workflowId: number | undefined,
): Promise<OutreachSource | undefined> =>
  (
    await sql<OutreachSource[]>`
      select w.id, w.status, w.rule_book_id, (w.compliance ? 'consent_attested_at') as attested
      from workflows w
      where w.tenant_id = ${tenantId} and w.kind <> 'rehearsal'
        ${
          workflowId !== undefined
            ? sql`and w.id = ${workflowId}`
            : sql`and w.status <> 'retired' and w.rule_book_id is not null and w.compliance ? 'consent_attested_at'
                  and w.kind <> 'outreach'`
        }
      order by (w.status = 'live') desc, w.updated_at desc, w.id desc
      limit 1`
  )[0]
