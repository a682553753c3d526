// SQL of signup_attributions (written once per signup, inside its transaction) and the signups
// report: counts per channel, with verified owners and paying workspaces read from identity and
// billing tables.
import type { Sql, Tx } from "../platform/Db.js"
import type { Channel, SignupAttribution } from "./attribution.js"

export async function insertSignupAttribution(
  tx: Tx,
  r: { tenantId: number; userId: number; attribution: SignupAttribution; channel: Channel; at: Date },
): Promise<void> {
  const b = r.attribution.body
  await tx`
    insert into signup_attributions (tenant_id, user_id, utm_source, utm_medium, utm_campaign, referrer, landing_path,
      first_touch, source, medium, campaign, created_at)
    values (${r.tenantId}, ${r.userId}, ${b.utm_source ?? null}, ${b.utm_medium ?? null}, ${b.utm_campaign ?? null},
      ${b.referrer ?? null}, ${b.landing_path ?? null},
      ${r.attribution.firstTouch === undefined ? null : tx.json(r.attribution.firstTouch as never)},
      ${r.channel.source}, ${r.channel.medium}, ${r.channel.campaign}, ${r.at})`
}

export interface ChannelCount extends Channel {
  readonly signups: number
  readonly verified: number
  readonly paying: number
}

/**
 * Signups since `since` per channel, most signups first. Verified: the signing-up user's email is
 * verified. Paying: the workspace has a succeeded top-up (or autocharge) or an active subscription.
 */
export const signupsByChannel = async (sql: Sql, since: Date, until: Date): Promise<ChannelCount[]> => {
  const rows = await sql<ChannelCount[]>`
    select a.source, a.medium, a.campaign, count(*)::int as signups,
      count(*) filter (where u.email_verified)::int as verified,
      count(*) filter (where exists (
          select 1 from payment_intents p where p.tenant_id = a.tenant_id and p.status = 'succeeded')
        or exists (
          select 1 from subscriptions s where s.tenant_id = a.tenant_id and s.status = 'active'))::int as paying
    from signup_attributions a
    join users u on u.id = a.user_id
    where a.created_at >= ${since} and a.created_at <= ${until}
    group by a.source, a.medium, a.campaign
    order by signups desc, a.source, a.medium, a.campaign`
  return [...rows]
}
