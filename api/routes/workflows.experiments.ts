// /api/workflows/{id}/experiments: a campaign's experiments — made with two to four arms, listed and
// read with their readout, and changed (an arm stopped, the experiment ended, the winner promoted).
import { Effect } from "effect"
import { z } from "zod"
import { ExperimentCreate, ExperimentPatch } from "../../src/experiments/experiment.schema.js"
import {
  createExperiment,
  getExperiment,
  listExperiments,
  patchExperiment,
} from "../../src/experiments/experiments.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

const READOUT =
  "readout: per arm targets, calls, connects, agreement, goal met and opt-outs as {rate, ci_low, ci_high, n, " +
  "successes} (Wilson 95%), talk time, approvals, cost per agreement; each rate's comparison of the arms " +
  "(Newcombe's interval for the difference, an always-valid mSPRT for whether the data tells them apart, " +
  "the calls still needed); the headline on agreement"

export const experimentsCreate = route({
  method: "POST",
  path: "/api/workflows/{id}/experiments",
  auth: "jwt",
  summary:
    "Start an experiment: two to four arms (the first the control), each with a weight and a persona, a cloned " +
    "voice or the rule-book fields it changes; targets are dealt to arms by a seeded hash, so retries keep theirs",
  tags: ["workflows"],
  params: z.object({ id: Id }),
  body: { json: ExperimentCreate },
  responses: {
    201: { description: `the experiment, with its ${READOUT}` },
    404: { description: "NOT_FOUND: no such campaign in the workspace" },
    409: { description: "EXPERIMENT_RUNNING: the workflow already runs one; WORKFLOW_RETIRED; WORKFLOW_NOT_READY" },
    422: { description: "VALIDATION_FAILED: an arm's name, fields, rule book (merged) or voice" },
  },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* createExperiment(c, params.id, body!), 201)
    }),
})

export const experimentsList = route({
  method: "GET",
  path: "/api/workflows/{id}/experiments",
  auth: "jwt",
  summary: `A campaign's experiments, newest first (at most 50), each with its ${READOUT}`,
  tags: ["workflows"],
  params: z.object({ id: Id }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* listExperiments(c.tenantId, params.id))
    }),
})

export const experimentsGet = route({
  method: "GET",
  path: "/api/workflows/{id}/experiments/{experimentId}",
  auth: "jwt",
  summary: `One experiment with its ${READOUT}`,
  tags: ["workflows"],
  params: z.object({ id: Id, experimentId: Id }),
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* getExperiment(c.tenantId, params.id, params.experimentId))
    }),
})

export const experimentsPatch = route({
  method: "PATCH",
  path: "/api/workflows/{id}/experiments/{experimentId}",
  auth: "jwt",
  summary:
    "Change an experiment, one thing at a time: stop arms ({arms: [{name, stopped: true}]}), end it " +
    "({status: 'ended'}), or promote an arm ({promote: name}: its variant becomes the workflow's rule book " +
    "version, persona and voice, and the experiment ends; 409 WORKFLOW_LIVE while the workflow is live)",
  tags: ["workflows"],
  params: z.object({ id: Id, experimentId: Id }),
  body: { json: ExperimentPatch },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const c = yield* callerOf(principal)
      return json(yield* patchExperiment(c, params.id, params.experimentId, body!))
    }),
})
