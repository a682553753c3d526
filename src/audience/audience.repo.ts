// SQL of audience attaches: the workflow check, the upload record, batches into audience_staging,
// and the one set-based merge that filters, de-duplicates, upserts and counts.

import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { TenantCountry } from "../phones/phone.js"
import type { Sql, Tx } from "../platform/Db.js"
import type { AudienceGroup } from "../voices/voices.geography.js"
import type { AudienceRow } from "./audience.parse.js"

export interface AttachTarget {
  readonly status: "draft" | "live" | "paused" | "retired"
  readonly archived: boolean
  readonly country: TenantCountry
}

/** The workflow as an attach sees it (and its tenant's country), if it is in the tenant. */
export async function attachTarget(sql: Sql, tenantId: number, workflowId: number): Promise<AttachTarget | undefined> {
  const [row] = await sql<[AttachTarget?]>`
    select w.status, w.archived_at is not null as archived, t.country
    from workflows w join tenants t on t.id = w.tenant_id
    where w.id = ${workflowId} and w.tenant_id = ${tenantId} and w.kind <> 'rehearsal'`
  return row
}

/** One callee added to a workflow's audience inside the caller's transaction (the public demo's single target). */
export async function insertTarget(
  tx: Tx,
  t: { tenantId: number; workflowId: number; phone: string; name: string | null },
): Promise<number> {
  const [row] = await tx<[{ id: number }]>`
    insert into audience_targets (tenant_id, workflow_id, phone_e164, name)
    values (${t.tenantId}, ${t.workflowId}, ${t.phone}, ${t.name})
    returning id`
  return row.id
}

export async function openUpload(
  sql: Sql,
  u: { tenantId: number; workflowId: number; format: "csv" | "json"; userId: number | null; now: Date },
): Promise<number> {
  const [row] = await sql<[{ id: number }]>`
    insert into audience_uploads (tenant_id, workflow_id, format, created_by_user_id, created_at)
    values (${u.tenantId}, ${u.workflowId}, ${u.format}, ${u.userId}, ${u.now})
    returning id`
  return row.id
}

/**
 * Uploads still receiving since before `cutoff` belong to a process that died mid-upload:
 * they are marked failed and their staging rows deleted.
 */
export async function sweepAbandoned(sql: Sql, cutoff: Date, now: Date): Promise<void> {
  await sql`
    with stale as (
      update audience_uploads set status = 'failed', finished_at = ${now}
      where status = 'receiving' and created_at < ${cutoff}
      returning id)
    delete from audience_staging where upload_id in (select id from stale)`
}

/** One multi-row insert of a batch (four array parameters, whatever the batch size). */
export async function stage(sql: Sql, uploadId: number, rows: ReadonlyArray<AudienceRow>): Promise<void> {
  await sql`
    insert into audience_staging (upload_id, line_no, phone_e164, name, fields)
    select ${uploadId}, l, p, n, f::jsonb
    from unnest(
      ${sql.array(
        rows.map((r) => r.line),
        23,
      )}::int[],
      ${sql.array(
        rows.map((r) => r.phone),
        25,
      )}::text[],
      ${sql.array(
        rows.map((r) => r.name),
        25,
      )}::text[],
      ${sql.array(
        rows.map((r) => JSON.stringify(r.fields)),
        25,
      )}::text[]
    ) as t(l, p, n, f)`
}

/** A failed attach: its staging rows go, and the upload is recorded as failed. */
export async function discard(sql: Sql, uploadId: number, now: Date): Promise<void> {
  await sql`delete from audience_staging where upload_id = ${uploadId}`
  await sql`update audience_uploads set status = 'failed', finished_at = ${now} where id = ${uploadId}
    and status = 'receiving'`
}

export interface MergeCounts {
  readonly accepted: number
  readonly rejected_dnc: number
  readonly rejected_ncpr: number
  readonly rejected_cooldown: number
  readonly rejected_erased: number
  readonly duplicates: number
  readonly total_targets: number
}

export type MergeOutcome =
  | { readonly kind: "applied"; readonly counts: MergeCounts }
  | { readonly kind: "retired" }
  | { readonly kind: "gone" }

/**
 * Merges an upload's staging rows into the workflow's audience in one transaction: the first
 * row of each number wins; each number is filtered by the tenant's DNC list, then the national
 * registry (+91 only; preference '0' blocks, otherwise the workflow's ncpr_category must be among
 * the accepted categories, and with no category any registration blocks), then the cool-down;
 * survivors are upserted (an existing target gets the new name when one is given, and the new
 * fields over its old ones). The staging rows are deleted and the upload marked applied.
 * The workflow row is share-locked so a retire or delete cannot slip in between.
 */
export async function merge(
  sql: Sql,
  m: {
    tenantId: number
    workflowId: number
    uploadId: number
    cooldownSince: Date
    now: Date
    extra: Readonly<Record<string, unknown>>
    /** Numbers of erased data subjects (src/erasure/suppression.ts): refused as rejected_erased. */
    erased?: readonly string[]
  },
): Promise<MergeOutcome> {
  return (await sql.begin(async (tx) => {
    const [wf] = await tx<[{ status: string; archived: boolean; ncpr_category: string | null }?]>`
      select w.status, w.archived_at is not null as archived,
        (select rb.body ->> 'ncpr_category' from rule_books rb where rb.id = w.rule_book_id) as ncpr_category
      from workflows w where w.id = ${m.workflowId} and w.tenant_id = ${m.tenantId}
      for share of w`
    if (wf === undefined || wf.archived) return { kind: "gone" }
    if (wf.status === "retired") return { kind: "retired" }
    // The planner cannot estimate the correlated filters and would spend longer JIT-compiling
    // the merge (~0.3 s at 100,000 rows) than running it; the sorts fit in memory at this size.
    await tx`set local jit = off`
    await tx`set local work_mem = '32MB'`
    const [c] = await tx<
      [
        {
          valid: number
          distinct_numbers: number
          accepted: number
          rejected_dnc: number
          rejected_ncpr: number
          rejected_cooldown: number
          rejected_erased: number
        },
      ]
    >`
      with firsts as (
        select distinct on (phone_e164) line_no, phone_e164, name, fields
        from audience_staging where upload_id = ${m.uploadId}
        order by phone_e164, line_no
      ), verdicts as (
        select f.line_no, f.phone_e164, f.name, f.fields,
          case
            when f.phone_e164 = any(${tx.array([...(m.erased ?? [])])}::text[]) then 'erased'
            when exists (select 1 from dnc_entries d where d.tenant_id = ${m.tenantId}
              and d.phone_e164 = f.phone_e164) then 'dnc'
            when f.phone_e164 like '+91%' and exists (
              select 1 from ncpr_registry n
              where n.phone_e164 = f.phone_e164
                and (n.preference = '0' or ${wf.ncpr_category}::text is null
                     or not (${wf.ncpr_category}::text = any (string_to_array(n.preference, ','))))) then 'ncpr'
            when exists (
              select 1 from recent_contacts r
              where r.tenant_id = ${m.tenantId} and r.phone_e164 = f.phone_e164
                and r.last_contacted_at > ${m.cooldownSince}) then 'cooldown'
            else 'accepted'
          end as verdict
        from firsts f
      ), upserted as (
        insert into audience_targets (tenant_id, workflow_id, phone_e164, name, fields, upload_id, created_at,
          updated_at)
        select ${m.tenantId}, ${m.workflowId}, phone_e164, name, fields, ${m.uploadId}, ${m.now}, ${m.now}
        from verdicts where verdict = 'accepted'
        order by line_no
        on conflict (workflow_id, phone_e164) do update set
          name = coalesce(excluded.name, audience_targets.name),
          fields = audience_targets.fields || excluded.fields,
          upload_id = excluded.upload_id,
          updated_at = excluded.updated_at
        returning 1
      )
      select
        (select count(*) from audience_staging where upload_id = ${m.uploadId})::int as valid,
        count(*)::int as distinct_numbers,
        (select count(*) from upserted)::int as accepted,
        (count(*) filter (where verdict = 'dnc'))::int as rejected_dnc,
        (count(*) filter (where verdict = 'ncpr'))::int as rejected_ncpr,
        (count(*) filter (where verdict = 'cooldown'))::int as rejected_cooldown,
        (count(*) filter (where verdict = 'erased'))::int as rejected_erased
      from verdicts`
    const [t] = await tx<
      [{ total: number }]
    >`select count(*)::int as total from audience_targets where workflow_id = ${m.workflowId}`
    const counts: MergeCounts = {
      accepted: c.accepted,
      rejected_dnc: c.rejected_dnc,
      rejected_ncpr: c.rejected_ncpr,
      rejected_cooldown: c.rejected_cooldown,
      rejected_erased: c.rejected_erased,
      duplicates: c.valid - c.distinct_numbers,
      total_targets: t.total,
    }
    await tx`delete from audience_staging where upload_id = ${m.uploadId}`
    await tx`
      update audience_uploads set status = 'applied', finished_at = ${m.now},
        counts = ${tx.json({ ...counts, ...m.extra } as never)}
      where id = ${m.uploadId}`
    return { kind: "applied", counts }
  })) as MergeOutcome
}

/**
 * A simulation campaign's callees, added to its hidden workflow in one statement (three array
 * parameters, whatever their number). `fields.sim_persona` names who answers each number.
 */
export async function insertSimulatedTargets(
  tx: Tx,
  t: {
    tenantId: number
    workflowId: number
    callees: ReadonlyArray<{ readonly phone: string; readonly name: string; readonly persona: string }>
  },
): Promise<number> {
  const inserted = await tx`
    insert into audience_targets (tenant_id, workflow_id, phone_e164, name, fields)
    select ${t.tenantId}, ${t.workflowId}, p, n, jsonb_build_object('sim_persona', s)
    from unnest(
      ${tx.array(
        t.callees.map((c) => c.phone),
        25,
      )}::text[],
      ${tx.array(
        t.callees.map((c) => c.name),
        25,
      )}::text[],
      ${tx.array(
        t.callees.map((c) => c.persona),
        25,
      )}::text[]
    ) with ordinality as u(p, n, s, i)
    order by i`
  return inserted.count
}

/** The distinct numbers of an upload in progress (checked against erased contacts before the merge). */
export async function stagedPhones(sql: Sql, uploadId: number): Promise<string[]> {
  const rows = await sql<{ phone_e164: string }[]>`
    select distinct phone_e164 from audience_staging where upload_id = ${uploadId}`
  return rows.map((r) => r.phone_e164)
}

/**
 * The workflow's audience in groups sharing a calling code and three more digits (enough to
 * tell NANP countries apart by area code): one sample number and the count of each.
 */
export async function audienceGroups(sql: Sql | Tx, workflowId: number): Promise<AudienceGroup[]> {
  return sql<AudienceGroup[]>`
    select min(phone_e164) as sample, count(*)::int as n from audience_targets
    where workflow_id = ${workflowId}
    group by left(phone_e164, 5)`
}

// --- a data-subject erase (src/dsr/) ---------------------------------------------------------------

/** The contact's audience targets (by number, or for an email by a field holding it) and their numbers. */
export async function contactTargets(tx: Tx, m: ContactMatch): Promise<{ ids: number[]; phones: string[] }> {
  const ids = (
    await tx<{ id: number }[]>`
    select id from audience_targets where tenant_id = ${m.tenantId}
      and ${m.kind === "phone" ? tx`phone_e164 = ${m.identifier}` : m.mentions("fields")}`
  ).map((r) => r.id)
  const phones =
    m.kind === "phone"
      ? [m.identifier]
      : (
          await tx<{ phone_e164: string }[]>`
          select distinct phone_e164 from audience_targets where id = any(${tx.array(ids)}::bigint[])`
        ).map((r) => r.phone_e164)
  return { ids, phones }
}

/** The contact's targets go, and any upload row still staged with their numbers; the targets deleted. */
export async function deleteContactTargets(
  tx: Tx,
  tenantId: number,
  targetIds: readonly number[],
  phones: readonly string[],
): Promise<number> {
  const deleted = await tx`delete from audience_targets where id = any(${tx.array([...targetIds])}::bigint[])`
  await tx`
    delete from audience_staging where phone_e164 = any(${tx.array([...phones])}::text[])
      and upload_id in (select id from audience_uploads where tenant_id = ${tenantId})`
  return deleted.count
}
