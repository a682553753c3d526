// The provider kinds a byok tenant brings credentials for, with the fields each credential takes,
// and the format checks derived from those fields (the same table drives GET /onboarding/providers).
import type { FieldError } from "../platform/errors.js"

export const PROVIDER_IDS = ["llm", "telco_a", "telco_b", "tts", "stt"] as const
export type ProviderId = (typeof PROVIDER_IDS)[number]

export type ProviderKind = "language_model" | "telephony" | "speech_synthesis" | "speech_recognition"

export interface CredentialField {
  /** Where the value goes in PUT /onboarding/credentials/{provider}: `primary_id`, `secret`, or `extra.<key>`. */
  readonly name: string
  readonly label: string
  readonly required: boolean
  /** true: write-only; stored encrypted, never returned (responses show a masked hint). */
  readonly secret: boolean
  /** `string_map`: an object of string values (extra.voice_map: persona → the provider's voice id). */
  readonly type: "string" | "url" | "e164" | "string_map"
  /** An ECMAScript regular expression the whole value must match. */
  readonly pattern?: string
  readonly max_length?: number
  /** What a valid value looks like, completing "must be …" in a 422. */
  readonly format?: string
  readonly hint?: string
}

export interface ProviderEntry {
  readonly id: ProviderId
  readonly kind: ProviderKind
  readonly name: string
  readonly description: string
  /**
   * What byok onboarding needs of this provider: `required`, or `one_of_kind` (a validated
   * credential for any one provider of the same kind, e.g. telco_a or telco_b).
   */
  readonly byok_requirement: "required" | "one_of_kind"
  readonly fields: ReadonlyArray<CredentialField>
  /** How a saved credential is checked live; without a base URL, only its format is checked. */
  readonly validation: string
}

const API_KEY_PATTERN = "^\\S{8,512}$"
const apiKey = (label: string): CredentialField => ({
  name: "secret",
  label,
  required: true,
  secret: true,
  type: "string",
  pattern: API_KEY_PATTERN,
  max_length: 512,
  format: "8 to 512 characters without spaces",
})
/** The spec's optional primary_id on a provider that has no account id of its own: kept, not used. */
const unusedPrimaryId: CredentialField = {
  name: "primary_id",
  label: "Account ID",
  required: false,
  secret: false,
  type: "string",
  pattern: "^\\S{1,200}$",
  max_length: 200,
  format: "1 to 200 characters without spaces",
  hint: "optional; stored with the credential, not used by Parley",
}
const baseUrl = (name: string, hint: string): CredentialField => ({
  name,
  label: "API base URL",
  required: false,
  secret: false,
  type: "url",
  max_length: 500,
  hint,
})

export const PROVIDERS: ReadonlyArray<ProviderEntry> = [
  {
    id: "llm",
    kind: "language_model",
    name: "Language model (OpenAI-compatible)",
    description:
      "Generates rule books and speaks the agent's lines, through any OpenAI-compatible chat-completions API.",
    byok_requirement: "required",
    fields: [
      apiKey("API key"),
      baseUrl(
        "extra.base_url",
        "the API root including its version, e.g. https://api.openai.com/v1; default: the platform's",
      ),
      {
        name: "extra.model",
        label: "Model",
        required: false,
        secret: false,
        type: "string",
        pattern: "^\\S{1,200}$",
        max_length: 200,
        format: "1 to 200 characters without spaces",
        hint: "e.g. gpt-4o-mini; default: the platform's",
      },
      {
        name: "primary_id",
        label: "Organization ID",
        required: false,
        secret: false,
        type: "string",
        // Sent as a header value: printable ASCII without spaces.
        pattern: "^[!-~]{1,200}$",
        max_length: 200,
        format: "1 to 200 printable ASCII characters without spaces",
        hint: "optional; sent as the OpenAI-Organization header, e.g. org-…",
      },
    ],
    validation: "GET {base_url}/models with the key as a bearer token: 200 valid, 401/403 rejected",
  },
  {
    id: "telco_a",
    kind: "telephony",
    name: "Telephony provider A",
    description: "Places and receives calls through your own telco_a account.",
    byok_requirement: "one_of_kind",
    fields: [
      {
        name: "primary_id",
        label: "Account SID",
        required: true,
        secret: false,
        type: "string",
        pattern: "^AC[0-9a-fA-F]{32}$",
        max_length: 34,
        format: "AC followed by 32 hexadecimal characters",
      },
      {
        name: "secret",
        label: "Auth token",
        required: true,
        secret: true,
        type: "string",
        pattern: "^[0-9a-fA-F]{32}$",
        max_length: 32,
        format: "32 hexadecimal characters",
      },
      baseUrl("extra.api_base_url", "default: the platform's telco_a API"),
      {
        name: "extra.caller_id",
        label: "Caller ID",
        required: false,
        secret: false,
        type: "e164",
        pattern: "^\\+[1-9]\\d{6,14}$",
        max_length: 16,
        format: "an E.164 phone number (+ and 7 to 15 digits)",
        hint: "a number of the account, e.g. +14155550100",
      },
    ],
    validation:
      "GET {api_base_url}/2010-04-01/Accounts/{primary_id}.json with HTTP Basic auth (sid:token): 200 valid, " +
      "401/403 rejected",
  },
  {
    id: "telco_b",
    kind: "telephony",
    name: "Telephony provider B",
    description: "Places and receives calls through your own telco_b account.",
    byok_requirement: "one_of_kind",
    fields: [
      {
        name: "primary_id",
        label: "Account ID",
        required: true,
        secret: false,
        type: "string",
        pattern: "^[A-Za-z0-9_-]{4,64}$",
        max_length: 64,
        format: "4 to 64 letters, digits, _ or -",
      },
      apiKey("API key"),
      baseUrl("extra.api_base_url", "the provider's API root"),
    ],
    validation: "GET {api_base_url}/v1/account with the key as a bearer token: 200 valid, 401/403 rejected",
  },
  {
    id: "tts",
    kind: "speech_synthesis",
    name: "Speech synthesis",
    description:
      "Speaks the agent's lines in the persona's voice (ElevenLabs' input-streaming protocol on calls heard as " +
      "audio; extra.voice_map names the vendor voice per persona).",
    byok_requirement: "required",
    fields: [
      apiKey("API key"),
      baseUrl("extra.api_base_url", "the provider's API root"),
      {
        name: "extra.voice_map",
        label: "Voice map",
        required: false,
        secret: false,
        type: "string_map",
        hint: 'persona → the provider\'s voice id, e.g. {"amelia": "v_123"}; at most 50 entries',
      },
      unusedPrimaryId,
    ],
    validation: "GET {api_base_url}/v1/user with the key as xi-api-key (ElevenLabs): 200 valid, 401/403 rejected",
  },
  {
    id: "stt",
    kind: "speech_recognition",
    name: "Speech recognition",
    description: "Transcribes the callee's speech (Deepgram's live-streaming protocol on calls heard as audio).",
    byok_requirement: "required",
    fields: [apiKey("API key"), baseUrl("extra.api_base_url", "the provider's API root"), unusedPrimaryId],
    validation:
      "GET {api_base_url}/v1/projects with Authorization: Token <key> (Deepgram): 200 valid, 401/403 rejected",
  },
]

const BY_ID = new Map<string, ProviderEntry>(PROVIDERS.map((p) => [p.id, p]))

export const isProviderId = (s: string): s is ProviderId => BY_ID.has(s)

export const providerEntry = (id: ProviderId): ProviderEntry => BY_ID.get(id)!

export interface CredentialInput {
  readonly primary_id?: string | undefined
  readonly secret: string
  readonly extra?: Readonly<Record<string, unknown>> | undefined
}

/** A credential input with its extra split into the catalogue's fields and the keys the provider does not use. */
export interface CheckedCredential {
  readonly primaryId: string | null
  readonly secret: string
  readonly extra: Readonly<Record<string, unknown>>
  /** extra's other keys, as given: kept (encrypted, as their values may be secrets), never used or returned. */
  readonly ignoredExtra: Readonly<Record<string, unknown>>
}

const MAX_MAP_ENTRIES = 50
/** Bounds on the extra keys a provider does not use: how many, their names, and their size as JSON. */
export const MAX_IGNORED_EXTRA_KEYS = 16
export const MAX_IGNORED_EXTRA_BYTES = 4096
const IGNORED_KEY = /^[A-Za-z0-9_.-]{1,64}$/

/**
 * Checks `input` against the provider's fields: required fields present, patterns matched. extra
 * is the spec's free object: keys the catalogue does not name for this provider are set aside as
 * ignored (bounded in number, name and size), not refused. Every provider takes the spec's
 * optional primary_id (it is stored; only telco_a, telco_b and the language model use it).
 * Messages never repeat a value (it may be a secret).
 */
export function checkCredentialInput(
  id: ProviderId,
  input: CredentialInput,
): { ok: true; value: CheckedCredential } | { ok: false; errors: FieldError[] } {
  const entry = providerEntry(id)
  const errors: FieldError[] = []
  const extraIn = input.extra ?? {}
  const extra: Record<string, unknown> = {}
  const named = new Set(entry.fields.map((f) => f.name))
  const unknown = Object.entries(extraIn).filter(([key]) => !named.has(`extra.${key}`))
  const ignoredExtra = Object.fromEntries(unknown)
  const ignoredProblem = checkIgnoredExtra(
    id,
    unknown.map(([key]) => key),
    ignoredExtra,
  )
  if (ignoredProblem !== undefined) errors.push({ field: "extra", message: ignoredProblem })

  for (const f of entry.fields) {
    const raw =
      f.name === "primary_id"
        ? input.primary_id
        : f.name === "secret"
          ? input.secret
          : extraIn[f.name.slice("extra.".length)]
    const absent = raw === undefined || raw === null || raw === ""
    if (absent) {
      if (f.required) errors.push({ field: f.name, message: "is required" })
      continue
    }
    const problem = checkValue(f, raw)
    if (problem !== undefined) errors.push({ field: f.name, message: problem })
    else if (f.name.startsWith("extra."))
      extra[f.name.slice("extra.".length)] = f.type === "url" ? (raw as string).replace(/\/+$/, "") : raw
  }
  if (errors.length > 0) return { ok: false, errors }
  const primaryId = input.primary_id === undefined || input.primary_id === "" ? null : input.primary_id
  return { ok: true, value: { primaryId, secret: input.secret, extra, ignoredExtra } }
}

// Names only in messages, never a value; a refused name is not repeated either (it may be anything).
function checkIgnoredExtra(id: ProviderId, keys: ReadonlyArray<string>, ignored: object): string | undefined {
  if (keys.length > MAX_IGNORED_EXTRA_KEYS)
    return `must have at most ${MAX_IGNORED_EXTRA_KEYS} keys that are not fields of ${id}`
  if (!keys.every((k) => IGNORED_KEY.test(k))) return "keys must be 1 to 64 letters, digits, _, . or -"
  if (Buffer.byteLength(JSON.stringify(ignored), "utf8") > MAX_IGNORED_EXTRA_BYTES)
    return `keys that are not fields of ${id} must take at most ${MAX_IGNORED_EXTRA_BYTES} bytes as JSON`
  return undefined
}

function checkValue(f: CredentialField, v: unknown): string | undefined {
  if (f.type === "string_map") {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return "must be an object of strings"
    const entries = Object.entries(v)
    if (entries.length > MAX_MAP_ENTRIES) return `must have at most ${MAX_MAP_ENTRIES} entries`
    for (const [k, val] of entries) {
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(k)) return "keys must be 1 to 64 letters, digits, _ or -"
      if (typeof val !== "string" || val.length === 0 || val.length > 200)
        return "values must be strings of 1 to 200 characters"
    }
    return undefined
  }
  if (typeof v !== "string") return "must be a string"
  if (f.max_length !== undefined && v.length > f.max_length) return `must be at most ${f.max_length} characters`
  if (f.type === "url") {
    let u: URL
    try {
      u = new URL(v)
    } catch {
      return "must be an http(s) URL"
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") return "must be an http(s) URL"
    // Credentials in the URL would be stored in plain text beside the encrypted secret.
    if (u.username !== "" || u.password !== "") return "must not contain a user name or password"
    if (u.search !== "" || u.hash !== "") return "must not have a query or fragment"
    return undefined
  }
  if (f.pattern !== undefined && !new RegExp(f.pattern).test(v))
    return f.format === undefined ? "has the wrong format" : `must be ${f.format}`
  return undefined
}
