// A run's experiment (src/experiments/): the workflow's running experiment as the run's calls follow
// it — each arm's rule book, voice and agent — loaded when the run starts and again when it changes.
import type { CallArmRef } from "../../src/calls/calls.repo.js"
import { armOf } from "../../src/experiments/assignment.js"
import { armRuleBook } from "../../src/experiments/experiment.schema.js"
import { runningExperiment } from "../../src/experiments/experiments.repo.js"
import type { Sql } from "../../src/platform/Db.js"
import type { PhoneVoice } from "../../src/providers/speech/streaming.interface.js"
import { armVoice } from "../../src/voices/call-voice.js"
import { findVoice } from "../../src/voices/voices.catalog.js"
import { RuleBook, recordsCalls } from "../../src/workflows/rulebook.schema.js"

/** What a call follows: the run's rule book, voice and agent, or its experiment arm's. */
export interface CallVariant {
  readonly ruleBook: RuleBook
  readonly voice: PhoneVoice
  readonly agentName: string
  /** Its audio is recorded (the variant's book discloses it and does not turn it off). */
  readonly records: boolean
  /** The arm the call is placed in; undefined outside an experiment. */
  readonly arm: CallArmRef | undefined
}

interface LoadedArm extends CallVariant {
  readonly name: string
  readonly weight: number
  readonly stopped: boolean
}

export interface RunExperiment {
  readonly id: number
  readonly seed: number
  readonly arms: readonly LoadedArm[]
}

/**
 * The workflow's running experiment as variants of the run's own (`base`), or undefined when it runs
 * none. An arm whose book no longer parses (the workflow's changed under it) follows the run's book.
 */
export async function loadRunExperiment(
  sql: Sql,
  tenantId: number,
  workflowId: number,
  base: CallVariant,
  demo: boolean,
): Promise<RunExperiment | undefined> {
  const e = await runningExperiment(sql, workflowId)
  if (e === undefined || e.tenant_id !== tenantId) return undefined
  const arms = await Promise.all(
    e.arms.map(async (a): Promise<LoadedArm> => {
      const parsed = RuleBook.safeParse(armRuleBook(base.ruleBook, a))
      const ruleBook = parsed.success ? parsed.data : base.ruleBook
      const voice =
        a.persona === null && a.voice === null
          ? base.voice
          : ((await armVoice(sql, tenantId, { persona: ruleBook.persona, voice: a.voice })) ?? base.voice)
      return {
        name: a.name,
        weight: a.weight,
        stopped: a.stopped_at !== null,
        ruleBook,
        voice,
        agentName: a.persona === null ? base.agentName : (findVoice(a.persona)?.name ?? base.agentName),
        records: !demo && recordsCalls(ruleBook),
        arm: { experimentId: e.id, arm: a.name },
      }
    }),
  )
  return { id: e.id, seed: e.seed, arms }
}

/** The variant a target's call follows: its arm's (a seeded hash of the target), else the run's. */
export function variantFor(experiment: RunExperiment | undefined, base: CallVariant, targetId: number): CallVariant {
  if (experiment === undefined) return base
  return armOf(experiment.seed, targetId, experiment.arms) ?? base
}
