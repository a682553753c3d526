// How a knowledge-base rule reads in every API answer: one shape for the CRUD routes, the learnt
// rules in the rollup and anything else that returns a rule.
import { iso } from "../platform/time.js"
import type { RuleRow } from "./kb.repo.js"

/** The rule as JSON; `feedbackIds` are the verdicts a learnt rule came from (empty otherwise). */
export const ruleJson = (row: RuleRow, feedbackIds: ReadonlyArray<number>) => ({
  id: row.id,
  bucket: row.bucket,
  title: row.title,
  body: row.body,
  trigger:
    row.trigger === null ? null : { phrases: [...(row.trigger.phrases ?? [])], category: row.trigger.category ?? null },
  workflow_id: row.workflow_id,
  priority: row.priority,
  status: row.status,
  archived: row.status === "archived",
  source_kind: row.source_kind,
  feedback_ids: [...feedbackIds],
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
})

export type RuleJson = ReturnType<typeof ruleJson>
