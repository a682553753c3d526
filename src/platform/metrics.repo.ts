// The one statement the metrics read when scraped: how many approvals wait for a decision, in
// every workspace (the partial index on pending approvals keeps it cheap).
import type postgres from "postgres"

// Db.ts's Sql, spelled out here: Db.ts instruments its pool through metrics.ts, which reads this.
type Sql = postgres.Sql<{ bigint: number }>

export async function countPendingApprovals(sql: Sql): Promise<number> {
  const [row] = await sql<[{ n: number }]>`select count(*)::int as n from approvals where status = 'pending'`
  return row.n
}
