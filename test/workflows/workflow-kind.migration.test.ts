// migrations/0045 on a database migrated to 0044 first: the workflows made before it get the kind
// their old marks meant (simulation_of, compliance.outreach_of, the demo workspace).
import { describe, expect, it } from "vitest"
import { connectPostgres } from "../../src/platform/Db.js"
import { migrate, readMigrations } from "../../src/platform/Migrator.js"
import { emptyDatabase } from "../support/harness.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

describe("migrations/0045", () => {
  it("gives the workflows made before it the kind their marks meant", async () => {
    const db = await emptyDatabase()
    const sql = connectPostgres(db.url, 1)
    try {
      const files = readMigrations()
      await migrate(
        sql,
        files.filter((f) => f.version < 45),
      )
      const tenant = async (name: string) =>
        (
          await sql<[{ id: number }]>`
            insert into tenants (name, country, currency) values (${name}, 'US', 'USD') returning id`
        )[0].id
      const workspace = await tenant("Acme")
      const demoWorkspace = await tenant("Parley")
      await sql`insert into demo_workspace (tenant_id) values (${demoWorkspace})`
      const workflow = async (tenantId: number, extra: { simulationOf?: number; compliance?: Json } = {}) =>
        (
          await sql<[{ id: number }]>`
            insert into workflows (tenant_id, name, persona, nl_prompt, simulation_of, compliance)
            values (${tenantId}, 'w', 'priya', '', ${extra.simulationOf ?? null}, ${sql.json(extra.compliance ?? {})})
            returning id`
        )[0].id
      const campaign = await workflow(workspace, { compliance: { consent_attested_at: "2025-01-01T00:00:00Z" } })
      const rehearsal = await workflow(workspace, { simulationOf: campaign })
      const outreach = await workflow(workspace, { compliance: { outreach_of: campaign } })
      const demo = await workflow(demoWorkspace)
      await migrate(sql, files)
      const rows = await sql<{ id: number; kind: string }[]>`select id, kind from workflows order by id`
      expect(rows.map((r) => [Number(r.id), r.kind])).toEqual([
        [campaign, "campaign"],
        [rehearsal, "rehearsal"],
        [outreach, "outreach"],
        [demo, "demo"],
      ])
    } finally {
      await sql.end({ timeout: 1 })
      await db.drop()
    }
  }, 60_000)
})
