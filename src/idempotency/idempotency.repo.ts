// SQL of idempotent retries: the claim on (workspace, key) taken before a handler runs, the
// response kept once it completes, the release after a failure. The only writer of idempotency_keys.
import type { ContactMatch } from "../erasure/contact-match.repo.js"
import type { Sql, Tx } from "../platform/Db.js"

export interface StoredResponse {
  readonly status: number
  readonly contentType: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer
}

/** What a claim found: ours to run, or the row another request left. */
export type Claim =
  | { readonly kind: "claimed"; readonly token: string }
  | { readonly kind: "running"; readonly sameRequest: boolean }
  | { readonly kind: "done"; readonly sameRequest: boolean; readonly response: StoredResponse }

interface Row {
  readonly fingerprint: Buffer
  readonly state: "running" | "done"
  readonly status: number | null
  readonly content_type: string | null
  readonly headers: Record<string, string> | null
  readonly body: Buffer | null
}

/**
 * Claims (tenant, key) for a request, in one statement: a new key, an expired row, or a running
 * claim older than `staleSeconds` (its process died) becomes ours; otherwise the row found answers.
 */
export async function claim(
  sql: Sql,
  c: { tenantId: number; key: string; fingerprint: Buffer; token: string; ttlSeconds: number; staleSeconds: number },
): Promise<Claim> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const [taken] = await sql<[{ claim_token: string }?]>`
      insert into idempotency_keys (tenant_id, key, fingerprint, claim_token, state, expires_at)
      values (${c.tenantId}, ${c.key}, ${c.fingerprint}, ${c.token}, 'running',
              now() + make_interval(secs => ${c.ttlSeconds}))
      on conflict (tenant_id, key) do update
        set fingerprint = excluded.fingerprint, claim_token = excluded.claim_token, state = 'running',
            claimed_at = now(), status = null, content_type = null, headers = null, body = null,
            expires_at = excluded.expires_at
        where idempotency_keys.expires_at <= now()
           or (idempotency_keys.state = 'running'
               and idempotency_keys.claimed_at < now() - make_interval(secs => ${c.staleSeconds}))
      returning claim_token`
    if (taken?.claim_token === c.token) return { kind: "claimed", token: c.token }
    const [row] = await sql<[Row?]>`
      select fingerprint, state, status, content_type, headers, body
      from idempotency_keys where tenant_id = ${c.tenantId} and key = ${c.key}`
    // Released between the two statements: try to claim it again.
    if (row === undefined) continue
    const sameRequest = row.fingerprint.equals(c.fingerprint)
    if (row.state === "running") return { kind: "running", sameRequest }
    return {
      kind: "done",
      sameRequest,
      response: {
        status: row.status ?? 200,
        contentType: row.content_type ?? "application/json; charset=utf-8",
        headers: row.headers ?? {},
        body: row.body ?? Buffer.alloc(0),
      },
    }
  }
  // A key claimed and released over and over by others: answer as if it were still running.
  return { kind: "running", sameRequest: true }
}

/** Keeps the completed response under our claim (nothing when the claim is no longer ours). */
export async function complete(sql: Sql, tenantId: number, key: string, token: string, r: StoredResponse) {
  await sql`
    update idempotency_keys
    set state = 'done', status = ${r.status}, content_type = ${r.contentType},
        headers = ${sql.json(r.headers as Record<string, string>)}, body = ${r.body}
    where tenant_id = ${tenantId} and key = ${key} and claim_token = ${token} and state = 'running'`
}

/** Gives the key up so a retry runs the request again (after a 5xx, a defect, an abort). */
export async function release(sql: Sql, tenantId: number, key: string, token: string): Promise<void> {
  await sql`
    delete from idempotency_keys
    where tenant_id = ${tenantId} and key = ${key} and claim_token = ${token} and state = 'running'`
}

/** Forgets expired rows, at most `limit` at a time; answers how many went. */
export async function pruneExpired(sql: Sql, limit: number): Promise<number> {
  const res = await sql`
    delete from idempotency_keys
    where ctid in (select ctid from idempotency_keys where expires_at <= now() limit ${limit})`
  return res.count
}

/** A data-subject erase (src/dsr/): a kept answer that may repeat the contact goes (a retry then runs anew). */
export async function forgetAnswersNaming(tx: Tx, m: ContactMatch): Promise<number> {
  const gone = await tx`
    delete from idempotency_keys where tenant_id = ${m.tenantId} and ${m.mentions("encode(body, 'escape')")}`
  return gone.count
}
