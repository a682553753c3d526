// /api/personas: the seven built-in personas (read-only) and the workspace's own. GET (list), POST
// (create), PUT …/{persona_id} (edit), DELETE …/{persona_id} (admin), PUT …/assign (a workflow's).
import { Effect } from "effect"
import { z } from "zod"
import {
  AGENT_NAME_MAX,
  ATTRIBUTES_MAX_BYTES,
  ATTRIBUTES_MAX_KEYS,
  CreatePersona,
  GREETING_MAX,
  NAME_MAX,
  RATE_MAX,
  RATE_MIN,
  UpdatePersona,
} from "../../src/personas/persona.schema.js"
import {
  assignPersona,
  createPersona,
  deletePersona,
  listPersonas,
  updatePersona,
} from "../../src/personas/personas.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { Id } from "../schemas.js"
import { callerOf } from "../session.js"

const BodyId = z.number({ error: "must be a positive integer" }).int("must be a positive integer").positive()

const Params = z.object({ persona_id: Id })

const Persona = z.object({
  id: z.number().int(),
  builtin: z.boolean(),
  name: z.string(),
  language: z.string(),
  voice: z.union([z.string(), z.number().int()]).nullable(),
  style: z.array(z.string()),
  greeting: z.string().nullable(),
  agent_name: z.string().nullable(),
  speaking_rate: z.number().nullable(),
  attributes: z.record(z.string(), z.unknown()),
  workflow_ids: z.array(z.number().int()).optional(),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
})

const BODY_DOC =
  `Free-form JSON object. Parley reads name (1–${NAME_MAX}), language (BCP 47, e.g. en-IN; defaults to a ` +
  "catalogue voice's), voice (a catalogue voice id such as priya, or the integer id of one of the workspace's " +
  "cloned voices), style (tone words: an array of short strings or one comma-separated string), greeting " +
  `(≤ ${GREETING_MAX}; placeholders {name}, {agent_name}, {company} only), agent_name (≤ ${AGENT_NAME_MAX}), ` +
  `speaking_rate (${RATE_MIN}–${RATE_MAX}); every other field is kept in attributes (at most ` +
  `${ATTRIBUTES_MAX_KEYS} fields, ${ATTRIBUTES_MAX_BYTES / 1024} KB as JSON)`

export const personasList = route({
  method: "GET",
  path: "/api/personas",
  auth: "jwt",
  summary:
    "The seven built-in personas (builtin: true, from the voice catalogue, read-only) and the workspace's own, " +
    "each with the workflows assigned to it",
  tags: ["personas"],
  responses: { 200: { description: "Personas", schema: z.object({ personas: z.array(Persona) }) } },
  handler: ({ principal }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* listPersonas(caller.tenantId))
    }),
})

export const personasCreate = route({
  method: "POST",
  path: "/api/personas",
  auth: "jwt",
  summary: `Create a persona. ${BODY_DOC}`,
  tags: ["personas"],
  body: { json: CreatePersona },
  responses: {
    201: { description: "The new persona", schema: Persona },
    422: {
      description:
        "VALIDATION_FAILED on the field at fault (voice: not a catalogue voice, not one of this workspace's cloned " +
        "voices, or a catalogue voice of another language; attributes: too many or too big)",
    },
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* createPersona(caller.tenantId, body!), 201)
    }),
})

export const personasUpdate = route({
  method: "PUT",
  path: "/api/personas/{persona_id}",
  auth: "jwt",
  summary:
    "Edit a persona: the fields sent replace its own (null clears greeting, agent_name, speaking_rate or voice; " +
    `an attribute sent as null is removed). ${BODY_DOC}`,
  tags: ["personas"],
  params: Params,
  body: { json: UpdatePersona },
  responses: {
    200: { description: "The edited persona", schema: Persona },
    409: {
      description:
        "CONFLICT: a built-in persona (read-only); WORKFLOW_LIVE: a live workflow speaks as it (details.workflow_ids)",
    },
    422: {
      description:
        "VALIDATION_FAILED on a field; RULE_BOOK_INVALID: a workflow it is assigned to has a rule book in another " +
        "language",
    },
  },
  handler: ({ principal, params, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* updatePersona(caller.tenantId, params.persona_id, body!))
    }),
})

export const personasDelete = route({
  method: "DELETE",
  path: "/api/personas/{persona_id}",
  auth: "jwt",
  permission: "admin",
  summary:
    "Delete a persona; the workflows it was assigned to fall back to their geography default (reassigned). " +
    "409 for a built-in, or WORKFLOW_LIVE while a live workflow speaks as it",
  tags: ["personas"],
  params: Params,
  responses: {
    200: {
      description: "Deleted",
      schema: z.object({
        id: z.number().int(),
        deleted: z.literal(true),
        reassigned: z.array(z.object({ workflow_id: z.number().int(), persona_id: z.number().int() })),
      }),
    },
    409: { description: "CONFLICT: a built-in persona; WORKFLOW_LIVE: pause the workflow first" },
  },
  handler: ({ principal, params }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* deletePersona(caller.tenantId, params.persona_id))
    }),
})

export const personasAssign = route({
  method: "PUT",
  path: "/api/personas/assign",
  auth: "jwt",
  summary:
    "Make a persona (the workspace's or a built-in) a workflow's, or with persona_id null its geography default: " +
    "the built-in chosen by the audience's dominant country, else the workspace's, and the rule book's language " +
    "(IN: priya, rohan, meera; US and CA: anya, kai; GB, IE and SG: amelia; AU and NZ: leo; elsewhere amelia, " +
    "anya). 409 while the workflow is live or retired",
  tags: ["personas"],
  body: {
    json: z.object({
      workflow_id: BodyId,
      persona_id: z.union([BodyId, z.null()], {
        error: "must be a persona id, or null for the workflow's geography default",
      }),
    }),
  },
  responses: {
    200: {
      description: "The workflow's persona now (geography_default: chosen because persona_id was null)",
      schema: z.object({
        workflow_id: z.number().int(),
        persona_id: z.number().int(),
        geography_default: z.boolean(),
        persona: Persona,
      }),
    },
    409: { description: "WORKFLOW_LIVE or WORKFLOW_RETIRED" },
    422: { description: "RULE_BOOK_INVALID: the persona's language does not match the rule book's" },
  },
  handler: ({ principal, body }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* assignPersona(caller.tenantId, body!.workflow_id, body!.persona_id))
    }),
})
