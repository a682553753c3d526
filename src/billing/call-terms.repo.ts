// SQL behind a workspace's call terms: its onboarding mode and which byok pieces it has now.
import type { Sql, Tx } from "../platform/Db.js"

export interface ByokReadiness {
  readonly mode: "bundled" | "byok"
  readonly subscribed: boolean
  readonly telco: boolean
  readonly llm: boolean
}

/**
 * The mode, whether the platform-fee subscription is active at `now`, and whether a validated
 * telephony and language-model credential exist (a telephony one only counts when it can be
 * dialed with: `platformTelcoA`, or its own api_base_url).
 */
export const byokReadiness = async (
  sql: Sql | Tx,
  tenantId: number,
  now: Date,
  platformTelcoA: boolean,
): Promise<ByokReadiness | undefined> => {
  const [row] = await sql<[ByokReadiness?]>`
    select t.onboarding_mode as mode,
      exists (select 1 from subscriptions s where s.tenant_id = t.id and s.status = 'active'
        and s.current_period_end > ${now}) as subscribed,
      exists (select 1 from provider_credentials c where c.tenant_id = t.id and c.provider = 'telco_a'
        and c.status = 'validated'
              and c.primary_id is not null and (${platformTelcoA}
                or jsonb_typeof(c.extra -> 'api_base_url') = 'string')) as telco,
      exists (select 1 from provider_credentials c where c.tenant_id = t.id and c.provider = 'llm'
        and c.status = 'validated') as llm
    from tenants t where t.id = ${tenantId}`
  return row
}
