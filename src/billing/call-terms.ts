// Who pays for a workspace's calls: the one rule that precheck, run start, the reservation and the
// runtime's choice of provider accounts all read, so a call is never free on the platform's accounts.
import type { Sql, Tx } from "../platform/Db.js"
import { byokReadiness } from "./call-terms.repo.js"

/** What a byok workspace still lacks before its calls stop costing the per-minute rate. */
export type ByokGap = "byok_subscription" | "telephony_credential" | "llm_credential"

export interface CallTerms {
  /**
   * byok: every paid leg (the carrier and the language model) runs on the workspace's own validated
   * accounts and its platform-fee subscription is active, so calls hold and cost nothing here.
   * bundled: calls run on the platform's accounts and are reserved and settled at the bundled rate.
   */
  readonly billing: "byok" | "bundled"
  /** For a workspace in byok mode that is billed as bundled: why. Empty otherwise. */
  readonly byokMissing: readonly ByokGap[]
}

/**
 * The workspace's terms now. A byok workspace missing any piece is billed (and dialed) as bundled
 * rather than refused: its campaign keeps going, paid for, and `byokMissing` says what to fix.
 * `platformTelcoA`: whether TELCO_A_API_URL is set, the API root a credential without its own
 * api_base_url is reached at (a credential nobody can dial with is not a leg of its own).
 */
export async function callTerms(
  sql: Sql | Tx,
  tenantId: number,
  now: Date,
  platformTelcoA: boolean,
): Promise<CallTerms> {
  const row = await byokReadiness(sql, tenantId, now, platformTelcoA)
  if (row === undefined || row.mode === "bundled") return BUNDLED
  const missing: ByokGap[] = [
    ...(row.subscribed ? [] : (["byok_subscription"] as const)),
    ...(row.telco ? [] : (["telephony_credential"] as const)),
    ...(row.llm ? [] : (["llm_credential"] as const)),
  ]
  return { billing: missing.length === 0 ? "byok" : "bundled", byokMissing: missing }
}

const BUNDLED: CallTerms = { billing: "bundled", byokMissing: [] }
