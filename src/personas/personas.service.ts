// Personas: the workspace's own (created, edited, deleted) beside the seven read-only built-ins of
// the voice catalogue, and which one each workflow speaks as (assigned, or its geography default).

import { Effect } from "effect"
import { audienceGroups } from "../audience/audience.repo.js"
import { Db, type Sql, type Tx } from "../platform/Db.js"
import { Conflict, NotFound, RuleBookInvalid, ValidationFailed } from "../platform/errors.js"
import { oncePerDatabase } from "../platform/per-database.js"
import { iso } from "../platform/time.js"
import { findAvatar } from "../voices/avatars.repo.js"
import { findVoice, VOICES } from "../voices/voices.catalog.js"
import { languageFamily } from "../workflows/rulebook.schema.js"
import { setWorkflowPersona } from "../workflows/workflows.repo.js"
import { dominantCountry, geographyDefault } from "./geography.js"
import { attributesProblem, type CreatePersona, mergedAttributes, type UpdatePersona } from "./persona.schema.js"
import * as repo from "./personas.repo.js"

/** A built-in's tone words: the first clause of its catalogue description ("Warm and composed"). */
const builtinStyle = (description: string): string[] =>
  (description.split(/[;.]/)[0] ?? "")
    .split(/,|\band\b/)
    .map((w) => w.trim().toLowerCase())
    .filter((w) => w !== "")

export interface PersonaView {
  readonly id: number
  readonly builtin: boolean
  readonly name: string
  readonly language: string
  /** A catalogue voice id, a cloned voice's integer id, or null (the workflow's own voice). */
  readonly voice: string | number | null
  readonly style: readonly string[]
  readonly greeting: string | null
  readonly agent_name: string | null
  readonly speaking_rate: number | null
  readonly attributes: Readonly<Record<string, unknown>>
  readonly workflow_ids?: readonly number[]
  readonly created_at: string | null
  readonly updated_at: string | null
}

/** A persona as every endpoint shows it; a built-in's details come from the voice catalogue. */
export const personaView = (r: repo.PersonaRow & { workflow_ids?: number[] }): PersonaView => {
  const catalogue = r.builtin_voice === null ? undefined : findVoice(r.builtin_voice)
  const common = {
    id: r.id,
    builtin: r.tenant_id === null,
    name: r.name,
    language: r.language,
    ...(r.workflow_ids !== undefined && { workflow_ids: r.workflow_ids }),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  }
  if (catalogue !== undefined)
    return {
      ...common,
      voice: catalogue.id,
      style: builtinStyle(catalogue.description),
      greeting: null,
      agent_name: catalogue.name,
      speaking_rate: catalogue.speech.speed,
      attributes: { gender: catalogue.gender, accent: catalogue.accent, description: catalogue.description },
    }
  return {
    ...common,
    voice: r.voice ?? r.voice_avatar_id,
    style: r.style,
    greeting: r.greeting,
    agent_name: r.agent_name,
    speaking_rate: r.speaking_rate,
    attributes: r.attributes,
  }
}

const CATALOGUE_ORDER = new Map(VOICES.map((v, i) => [v.id, i]))

/** The built-in rows, made to match the catalogue once per database client. */
const builtins = oncePerDatabase((sql: Sql) => repo.upsertBuiltins(sql, VOICES))

const personaNotFound = (id: number) => new NotFound({ message: `persona ${id} not found` })
const workflowNotFound = (id: number) => new NotFound({ message: `workflow ${id} not found` })
const readOnly = (id: number) =>
  new Conflict({ message: `persona ${id} is built in and read-only: create your own persona to change it` })
const invalid = (field: string, message: string) =>
  new ValidationFailed({ message: `${field}: ${message}`, errors: [{ field, message }] })

/** The rule book's check, as for its own persona: the persona must speak the book's language. */
const languageMismatch = (
  persona: { id: number; language: string },
  workflows: ReadonlyArray<{ id: number; language: string | null }>,
  field: string,
) => {
  const errors = workflows
    .filter((w) => w.language !== null && languageFamily(w.language) !== languageFamily(persona.language))
    .map((w) => ({
      field,
      message:
        `persona ${persona.id} speaks ${persona.language}, which does not match language ${w.language} ` +
        `of workflow ${w.id}'s rule book`,
    }))
  return errors.length === 0
    ? undefined
    : new RuleBookInvalid({ message: "the persona's language does not match the rule book's", errors })
}

export const listPersonas = (tenantId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    yield* Effect.promise(() => builtins(sql))
    const rows = yield* Effect.promise(() => repo.listPersonas(sql, tenantId))
    const order = (r: repo.PersonaRow) =>
      r.builtin_voice === null ? VOICES.length + r.id : (CATALOGUE_ORDER.get(r.builtin_voice) ?? VOICES.length)
    return { personas: [...rows].sort((x, y) => order(x) - order(y)).map(personaView) }
  })

interface VoiceChoice {
  readonly voice: string | null
  readonly voiceAvatarId: number | null
}

/** The persona's voice and language, checked together: a cloned voice must be the workspace's. */
const checkedVoice = (sql: Sql, tenantId: number, ref: string | number | null, language: string) =>
  Effect.gen(function* () {
    if (ref === null) return { voice: null, voiceAvatarId: null } satisfies VoiceChoice
    if (typeof ref === "number") {
      const avatar = yield* Effect.promise(() => findAvatar(sql, tenantId, ref))
      if (avatar === undefined)
        return yield* Effect.fail(invalid("voice", `cloned voice ${ref} is not one of this workspace's voices`))
      return { voice: null, voiceAvatarId: ref } satisfies VoiceChoice
    }
    const catalogue = findVoice(ref)!
    if (languageFamily(catalogue.language) !== languageFamily(language))
      return yield* Effect.fail(
        invalid("voice", `voice ${ref} speaks ${catalogue.language}, which does not match language ${language}`),
      )
    return { voice: ref, voiceAvatarId: null } satisfies VoiceChoice
  })

const checkedAttributes = (attributes: Record<string, unknown>) => {
  const problem = attributesProblem(attributes)
  return problem === undefined ? Effect.succeed(attributes) : Effect.fail(invalid("attributes", problem))
}

/** Creates a workspace persona: 422 on the field at fault. */
export const createPersona = (tenantId: number, body: CreatePersona) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const voiceRef = body.voice ?? null
    const language = body.language ?? (typeof voiceRef === "string" ? findVoice(voiceRef)?.language : undefined)
    if (language === undefined)
      return yield* Effect.fail(invalid("language", "is required unless voice is a catalogue voice"))
    const voice = yield* checkedVoice(sql, tenantId, voiceRef, language)
    const attributes = yield* checkedAttributes(mergedAttributes({}, body))
    const row = yield* Effect.promise(() =>
      repo.insertPersona(sql, tenantId, {
        name: body.name,
        language,
        ...voice,
        style: body.style ?? [],
        greeting: body.greeting ?? null,
        agentName: body.agent_name ?? null,
        speakingRate: body.speaking_rate ?? null,
        attributes,
      }),
    )
    return personaView({ ...row, workflow_ids: [] })
  })

type PersonaError = NotFound | Conflict | RuleBookInvalid

/** A domain error thrown out of a postgres.js transaction, so the transaction rolls back. */
class Failure {
  constructor(readonly error: PersonaError) {}
}

/** Runs `work` in one transaction; a Failure it throws rolls it back and becomes the Effect's error. */
const inTransaction = <A>(work: (tx: Tx) => Promise<A>): Effect.Effect<A, PersonaError, Db> =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const out = yield* Effect.promise(() =>
      sql
        .begin((tx) => work(tx))
        .then(
          (value) => ({ ok: true as const, value: value as A }),
          (e: unknown) => {
            if (e instanceof Failure) return { ok: false as const, error: e.error }
            throw e
          },
        ),
    )
    return out.ok ? out.value : yield* Effect.fail(out.error)
  })

const liveConflict = (personaId: number, workflowIds: number[], action: string) =>
  new Conflict({
    code: "WORKFLOW_LIVE",
    message:
      `persona ${personaId} is speaking for live workflow ${workflowIds.join(", ")}: ` +
      `pause it before you ${action}`,
    details: { workflow_ids: workflowIds },
  })

/**
 * Edits a workspace persona: the fields sent replace its own (null clears an optional one; other
 * fields merge into attributes). 409 for a built-in, or while a live workflow speaks as it; 422
 * when a workflow it is assigned to has a rule book in another language.
 */
export const updatePersona = (tenantId: number, id: number, body: UpdatePersona) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    // The voice is checked before the transaction (a cloned voice's row is another table's).
    const current = yield* Effect.promise(() => repo.findPersona(sql, tenantId, id))
    if (current === undefined) return yield* Effect.fail(personaNotFound(id))
    if (current.tenant_id === null) return yield* Effect.fail(readOnly(id))
    const language = body.language ?? current.language
    // A voice kept as it is is checked again only against a new language (a cloned voice deleted
    // since stays named, as the workflows speaking with it fall back to their persona's voice).
    const voice: VoiceChoice =
      body.voice !== undefined || (current.voice !== null && language !== current.language)
        ? yield* checkedVoice(sql, tenantId, body.voice === undefined ? current.voice : body.voice, language)
        : { voice: current.voice, voiceAvatarId: current.voice_avatar_id }
    const attributes = yield* checkedAttributes(mergedAttributes(current.attributes, body))
    const keep = <T>(given: T | undefined, old: T): T => (given === undefined ? old : given)
    const fields: repo.PersonaFields = {
      name: body.name ?? current.name,
      language,
      ...voice,
      style: body.style ?? current.style,
      greeting: keep(body.greeting, current.greeting),
      agentName: keep(body.agent_name, current.agent_name),
      speakingRate: keep(body.speaking_rate, current.speaking_rate),
      attributes,
    }
    return yield* inTransaction(async (tx) => {
      const locked = await repo.findPersona(tx, tenantId, id, "update")
      if (locked === undefined) throw new Failure(personaNotFound(id))
      const users = await repo.workflowsOf(tx, id, "share")
      const live = users.filter((w) => w.status === "live").map((w) => w.id)
      if (live.length > 0) throw new Failure(liveConflict(id, live, "change it"))
      const mismatch = languageMismatch({ id, language }, users, "language")
      if (mismatch !== undefined) throw new Failure(mismatch)
      const row = await repo.updatePersona(tx, id, fields)
      return personaView({ ...row, workflow_ids: users.map((w) => w.id) })
    })
  })

/** The built-in a workflow falls back to, by geography and its rule book's language. */
const defaultFor = async (tx: Tx, w: repo.WorkflowForPersona, ids: Map<string, number>): Promise<number> => {
  const groups = await audienceGroups(tx, w.id)
  const voice = geographyDefault({
    audienceCountry: dominantCountry(groups, w.country),
    workspaceCountry: w.country,
    language: w.language ?? findVoice(w.book_persona ?? "")?.language ?? "en",
    ruleBookPersona: w.book_persona ?? VOICES[0]!.id,
  })
  return ids.get(voice)!
}

/**
 * Deletes a workspace persona: 409 for a built-in, 409 WORKFLOW_LIVE while a live workflow speaks
 * as it; otherwise each workflow it was assigned to falls back to its geography default.
 */
export const deletePersona = (tenantId: number, id: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const ids = yield* Effect.promise(() => builtins(sql))
    return yield* inTransaction(async (tx) => {
      const row = await repo.findPersona(tx, tenantId, id, "update")
      if (row === undefined) throw new Failure(personaNotFound(id))
      if (row.tenant_id === null) throw new Failure(readOnly(id))
      const users = await repo.workflowsOf(tx, id, "update")
      const live = users.filter((w) => w.status === "live").map((w) => w.id)
      if (live.length > 0) throw new Failure(liveConflict(id, live, "delete it"))
      const reassigned: Array<{ workflow_id: number; persona_id: number }> = []
      for (const w of users) {
        const fallback = await defaultFor(tx, w, ids)
        await setWorkflowPersona(tx, w.id, fallback)
        reassigned.push({ workflow_id: w.id, persona_id: fallback })
      }
      await repo.softDeletePersona(tx, id)
      return { id, deleted: true as const, reassigned }
    })
  })

/**
 * Makes a persona (the workspace's own or a built-in) a workflow's, or with personaId null its
 * geography default. 404 for a workflow or persona not in the workspace; 409 while the workflow
 * is live or retired; 422 RULE_BOOK_INVALID when the persona speaks another language than the book.
 */
export const assignPersona = (tenantId: number, workflowId: number, personaId: number | null) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const ids = yield* Effect.promise(() => builtins(sql))
    return yield* inTransaction(async (tx) => {
      // The persona first, then the workflow: the order edits and deletes lock them in.
      const chosen = personaId === null ? undefined : await repo.findPersona(tx, tenantId, personaId, "share")
      if (personaId !== null && chosen === undefined) throw new Failure(personaNotFound(personaId))
      const w = await repo.lockWorkflow(tx, tenantId, workflowId)
      if (w === undefined) throw new Failure(workflowNotFound(workflowId))
      if (w.status === "live")
        throw new Failure(
          new Conflict({
            code: "WORKFLOW_LIVE",
            message: `workflow ${workflowId} is live: pause it before you change its persona`,
          }),
        )
      if (w.status === "retired" || w.archived)
        throw new Failure(
          new Conflict({ code: "WORKFLOW_RETIRED", message: `workflow ${workflowId} is retired and cannot change` }),
        )
      let persona = chosen
      if (persona !== undefined) {
        const mismatch = languageMismatch(persona, [w], "persona_id")
        if (mismatch !== undefined) throw new Failure(mismatch)
      } else {
        persona = await repo.findPersona(tx, tenantId, await defaultFor(tx, w, ids))
        if (persona === undefined) throw new Error("a built-in persona is missing")
      }
      await setWorkflowPersona(tx, workflowId, persona.id)
      return {
        workflow_id: workflowId,
        persona_id: persona.id,
        geography_default: personaId === null,
        persona: personaView(persona),
      }
    })
  })
