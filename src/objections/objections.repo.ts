// SQL for the global objection library (migrations/0001). Global rows: no tenant_id.
import type { Effect } from "effect"
import { type Db, query } from "../platform/Db.js"

export interface Objection {
  readonly id: number
  readonly category: string
  readonly trigger_text: string
  readonly rebuttal_template: string
  readonly use_count: number
}

export const listObjections = (category: string | undefined): Effect.Effect<Objection[], never, Db> =>
  query(
    (sql) => sql<Objection[]>`
      select id, category, trigger_text, rebuttal_template, use_count
      from objections
      ${category === undefined ? sql`` : sql`where category = ${category}`}
      order by id`,
  )

export const findObjection = (id: number): Effect.Effect<Objection | undefined, never, Db> =>
  query(async (sql) => {
    const [row] = await sql<Objection[]>`
      select id, category, trigger_text, rebuttal_template, use_count from objections where id = ${id}`
    return row
  })
