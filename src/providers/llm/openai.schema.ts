// OpenAI's strict structured-output dialect of JSON Schema: what the adapter sends as
// response_format for any schema a caller asks with.

/** Validation keywords strict mode may reject; the caller validates the answer against them. */
const DROPPED_KEYWORDS = [
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "minItems",
  "maxItems",
  "pattern",
  "format",
  "multipleOf",
  "uniqueItems",
] as const

/**
 * `schema` rewritten for strict mode: every object lists all its properties in `required` and
 * sets `additionalProperties: false` (an optional property becomes nullable instead), nullable
 * primitives become type unions (`["integer", "null"]`), `const` becomes a one-value `enum`,
 * `$schema` is dropped, and length, range and size limits move into `description`, which the
 * model reads but the server does not enforce.
 */
export function toStrictJsonSchema(schema: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const hints: string[] = []
  for (const [key, value] of Object.entries(schema)) {
    if (key === "$schema") continue
    if ((DROPPED_KEYWORDS as readonly string[]).includes(key)) continue
    if (key === "const") out.enum = [value]
    else if (key === "properties" && isObject(value)) {
      out.properties = Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, isObject(v) ? toStrictJsonSchema(v) : v]),
      )
    } else if (key === "items" && isObject(value)) out.items = toStrictJsonSchema(value)
    else if ((key === "anyOf" || key === "$defs") && value !== undefined) {
      out[key] = Array.isArray(value)
        ? value.map((v: unknown) => (isObject(v) ? toStrictJsonSchema(v) : v))
        : isObject(value)
          ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isObject(v) ? toStrictJsonSchema(v) : v]))
          : value
    } else out[key] = value
  }
  hints.push(...limitHints(schema))

  if (isObject(out.properties)) {
    const properties = out.properties
    const required = new Set(
      Array.isArray(schema.required)
        ? (schema.required as unknown[]).filter((k): k is string => typeof k === "string")
        : [],
    )
    for (const [k, v] of Object.entries(properties)) {
      if (!required.has(k) && isObject(v)) properties[k] = nullable(v)
    }
    out.required = Object.keys(properties)
    out.additionalProperties = false
  }

  const union = primitiveUnion(out.anyOf)
  if (union !== undefined) {
    delete out.anyOf
    out.type = union.types
    hints.unshift(...union.descriptions)
  }

  const description = [typeof out.description === "string" ? out.description : undefined, ...hints].filter(
    (d): d is string => d !== undefined && d !== "",
  )
  if (description.length > 0) out.description = description.join("; ")
  return out
}

/** The dropped limits in words, e.g. "1 to 200 characters". */
function limitHints(schema: Record<string, unknown>): string[] {
  const n = (key: string): number | undefined => {
    const v = schema[key]
    // zod writes MAX_SAFE_INTEGER as every integer's maximum: no limit worth telling.
    return typeof v === "number" && Math.abs(v) < Number.MAX_SAFE_INTEGER ? v : undefined
  }
  const range = (lo: number | undefined, hi: number | undefined, unit: string): string | undefined =>
    lo !== undefined && hi !== undefined
      ? `${lo} to ${hi}${unit}`
      : lo !== undefined
        ? `at least ${lo}${unit}`
        : hi !== undefined
          ? `at most ${hi}${unit}`
          : undefined
  const exclusiveMin = n("exclusiveMinimum")
  return [
    range(n("minLength"), n("maxLength"), " characters"),
    range(n("minItems"), n("maxItems"), " items"),
    range(
      n("minimum") ?? (exclusiveMin !== undefined && schema.type === "integer" ? exclusiveMin + 1 : undefined),
      n("maximum"),
      "",
    ),
    typeof schema.pattern === "string" ? `matching ${schema.pattern}` : undefined,
  ].filter((h): h is string => h !== undefined)
}

/** `anyOf` of bare primitive types (after conversion) as one type list, with their descriptions. */
function primitiveUnion(anyOf: unknown): { types: string[]; descriptions: string[] } | undefined {
  if (!Array.isArray(anyOf) || anyOf.length === 0) return undefined
  const types: string[] = []
  const descriptions: string[] = []
  for (const branch of anyOf) {
    if (!isObject(branch) || typeof branch.type !== "string" || ["object", "array"].includes(branch.type))
      return undefined
    if (Object.keys(branch).some((k) => k !== "type" && k !== "description")) return undefined
    types.push(branch.type)
    if (typeof branch.description === "string") descriptions.push(branch.description)
  }
  return { types, descriptions }
}

/** `schema` that also accepts null. */
function nullable(schema: Record<string, unknown>): Record<string, unknown> {
  const t = schema.type
  if (typeof t === "string")
    return t === "null"
      ? schema
      : {
          ...schema,
          type: [t, "null"],
          ...(Array.isArray(schema.enum) && { enum: [...(schema.enum as unknown[]), null] }),
        }
  if (Array.isArray(t)) return t.includes("null") ? schema : { ...schema, type: [...t, "null"] }
  return { anyOf: [schema, { type: "null" }] }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
