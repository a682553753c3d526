// The bad-input fuzzer: reads /openapi.json from a running server and sends every operation
// requests made by fast-check (bodies from the operation's own schema, then broken: wrong types,
// huge and negative numbers, long strings, unknown fields, broken JSON, values nested 5,000 deep at
// each field (every route, every field, once, then at random), wrong content types, bad path ids,
// junk queries, oversized headers), anonymous and as a user (JWT, cookie), an API key and
// the system key. Each answer must come in time, never be a 5xx, and a JSON 4xx must be the
// contract's {error, code, field?}. The server's RSS is sampled from /proc as it goes.
import fc from "fast-check"
import { Agent, request } from "undici"
import { rssOf } from "../support/memory.js"

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any
type Schema = Json

export type AuthKind = "none" | "jwt" | "key" | "cookie" | "garbage" | "system"

export interface Operation {
  readonly method: string
  readonly template: string
  readonly pathParams: ReadonlyArray<string>
  readonly query: ReadonlyArray<{ name: string; schema: Schema }>
  /** The request body's schema by content type, when the operation takes one. */
  readonly body: Readonly<Record<string, Schema>> | undefined
  readonly authenticated: boolean
  readonly system: boolean
}

/** One request to send, with the mutation that made it (for the report). */
export interface Case {
  readonly op: string
  readonly kind: string
  readonly method: string
  readonly path: string
  readonly auth: AuthKind
  readonly headers: Readonly<Record<string, string>>
  readonly body: string | undefined
  /** A request head past HEAD_LIMIT: the engine's 431, or a reset while writing, is allowed. */
  readonly oversized: boolean
}

export type Outcome =
  | {
      readonly kind: "answer"
      readonly status: number
      readonly contentType: string
      readonly body: string
      readonly ms: number
    }
  | { readonly kind: "closed"; readonly message: string; readonly ms: number }
  | { readonly kind: "timeout"; readonly ms: number }

/** The credentials cases are sent with, refreshed when a case revokes one (logout, key delete). */
export interface Credentials {
  jwt: string
  cookie: string
  apiKey: string
  systemKey: string
  tenantId: number
  /** Real ids of this workspace's things, so path ids sometimes name something that exists. */
  ids: string[]
}

export interface FuzzOptions {
  readonly base: string
  /** The server's process id, for its RSS (Linux /proc). */
  readonly pid: number
  readonly requests: number
  readonly seed: number
  /** Requests in flight at once. */
  readonly concurrency?: number
  /** A request not answered within this is a hang. */
  readonly timeoutMs?: number
  readonly systemKey: string
  readonly onProgress?: (done: number, rssBytes: number) => void
}

export interface Violation {
  readonly problem: string
  readonly case: Case
}

export interface FuzzReport {
  readonly sent: number
  readonly byStatus: Readonly<Record<string, number>>
  readonly violations: ReadonlyArray<Violation>
  /** [requests sent, server RSS in bytes], sampled as the run went. */
  readonly rss: ReadonlyArray<readonly [number, number]>
  readonly seed: number
  readonly ms: number
  /** The slowest answers: operation and milliseconds. */
  readonly slowest: ReadonlyArray<readonly [string, number]>
}

export { rssOf }

// --- the operations, from the OpenAPI document ------------------------------------------------

export function operationsOf(doc: Json): Operation[] {
  const ops: Operation[] = []
  for (const [template, methods] of Object.entries(doc.paths as Json))
    for (const [method, op] of Object.entries(methods as Json)) {
      const params = (op.parameters ?? []) as Json[]
      const content = op.requestBody?.content as Json | undefined
      const security = (op.security ?? []) as Json[]
      const schemes = security.flatMap((s) => Object.keys(s))
      ops.push({
        method: method.toUpperCase(),
        template,
        pathParams: params.filter((p) => p.in === "path").map((p) => p.name as string),
        query: params.filter((p) => p.in === "query").map((p) => ({ name: p.name as string, schema: p.schema ?? {} })),
        body:
          content && Object.fromEntries(Object.entries(content).map(([type, c]) => [type, (c as Json).schema ?? {}])),
        authenticated: schemes.includes("bearerJwt"),
        system: schemes.includes("systemKey"),
      })
    }
  return ops
}

// --- values -------------------------------------------------------------------------------------

const HUGE_NUMBERS = [
  -1,
  0,
  -0.5,
  1.5,
  2 ** 31,
  -(2 ** 31) - 1,
  2 ** 53 + 2,
  -(2 ** 63),
  1e21,
  -1e21,
  1e308,
  -1e308,
  5e-324,
  Number.MAX_SAFE_INTEGER,
]

const NASTY_STRINGS = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udfff\ud800",
  "💩".repeat(50),
  "\u202e\u0041\u0042",
  "' OR 1=1 --",
  "'; drop table tenants; --",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template-injection probe, sent as written
  "${7*7}{{7*7}}",
  "<script>alert(1)</script>",
  "../../../../etc/passwd",
  "%00%ff",
  "\\u0000",
  "null",
  "true",
  "-1",
  "1e309",
  "NaN",
  "__proto__",
  "+15555550100",
  "+1",
  "x@y",
  "http://169.254.169.254/latest/meta-data/",
  "file:///etc/passwd",
  "javascript:alert(1)",
]

const longString = fc.constantFrom(1_000, 10_000, 100_000, 600_000).map((n) => "é".repeat(n / 2))

/** Any JSON value, some of them hostile. */
const junkValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(...HUGE_NUMBERS),
  fc.constantFrom(...NASTY_STRINGS),
  longString,
  fc.constant(null),
  // Own keys named __proto__ and constructor, as JSON.parse makes them: prototype pollution probes.
  fc.constant(JSON.parse('{"__proto__": {"admin": true}, "constructor": {"prototype": {"polluted": 1}}}')),
  fc.constant(JSON.parse(`${"[".repeat(30)}${"]".repeat(30)}`)),
)

/** A value the JSON schema (as zod writes it) accepts, mostly; falls back to any JSON value. */
export function fromSchema(s: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (s === undefined || depth > 4) return fc.jsonValue({ maxDepth: 1 })
  if (Array.isArray(s.enum) && s.enum.length > 0) return fc.constantFrom(...(s.enum as unknown[]))
  if ("const" in s) return fc.constant(s.const)
  const alts = (s.anyOf ?? s.oneOf) as Schema[] | undefined
  if (alts && alts.length > 0) return fc.oneof(...alts.map((a) => fromSchema(a, depth + 1)))
  if (Array.isArray(s.allOf) && s.allOf.length > 0) return fromSchema(s.allOf[0], depth + 1)
  const type = Array.isArray(s.type) ? s.type[0] : s.type
  switch (type) {
    case "string": {
      const min = (s.minLength as number | undefined) ?? 0
      const max = Math.max(min, Math.min((s.maxLength as number | undefined) ?? 40, 60))
      if (s.format === "email") return fc.emailAddress()
      if (s.format === "uri") return fc.webUrl()
      if (s.format === "date-time") return fc.date({ noInvalidDate: true }).map((d) => d.toISOString())
      if (s.format === "date") return fc.date({ noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10))
      if (typeof s.pattern === "string" && /phone|\\\+/.test(s.pattern))
        return fc.integer({ min: 2_000_000_000, max: 9_999_999_999 }).map((n) => `+1${n}`)
      return fc.string({ minLength: min, maxLength: max })
    }
    case "integer": {
      const min = (s.minimum as number | undefined) ?? -1000
      const max = (s.maximum as number | undefined) ?? 1_000_000
      return fc.integer({ min: Math.max(min, -(2 ** 31)), max: Math.min(max, 2 ** 31 - 1) })
    }
    case "number":
      return fc.double({ noNaN: true, noDefaultInfinity: true, min: s.minimum ?? -1e6, max: s.maximum ?? 1e6 })
    case "boolean":
      return fc.boolean()
    case "null":
      return fc.constant(null)
    case "array":
      return fc.array(fromSchema(s.items as Schema | undefined, depth + 1), {
        minLength: Math.min((s.minItems as number | undefined) ?? 0, 3),
        maxLength: Math.min((s.maxItems as number | undefined) ?? 4, 4),
      })
    case "object": {
      const props = (s.properties ?? {}) as Record<string, Schema>
      const required = new Set((s.required ?? []) as string[])
      const model: Record<string, fc.Arbitrary<unknown>> = {}
      for (const [k, v] of Object.entries(props)) model[k] = fromSchema(v, depth + 1)
      return fc.record(model, { requiredKeys: [...required].filter((k) => k in model) })
    }
    default:
      return fc.jsonValue({ maxDepth: 1 })
  }
}

/** A step into a body: a field, or 0 for an array's first element. */
type Step = string | 0

/** Field names a deep value goes under where the schema names none (raw webhooks), and beside those it names. */
const DEEP_FIELD_NAMES = ["data", "metadata"]
/** How deep the deep-field bodies nest their value: mostly far past the limit, sometimes just inside it. */
const DEEP_LEVELS = [5_000, 5_000, 60]
/** Stands for the deep value in a body until it is written out as text. */
const DEEP_MARK = "\u2063fuzz-deep\u2063"

/** JSON text `levels` arrays and objects deep, alternating: {"a":[{"a":[…0…]}]}. */
function nestedText(levels: number): string {
  const open: string[] = []
  const close: string[] = []
  for (let i = 0; i < levels; i++) {
    open.push(i % 2 === 0 ? '{"a":' : "[")
    close.push(i % 2 === 0 ? "}" : "]")
  }
  return `${open.join("")}0${close.reverse().join("")}`
}

/** The object schema a body or an array's items use (the first such branch of a union), if any. */
function objectSchema(s: Schema | undefined): Schema | undefined {
  if (s === undefined) return undefined
  if (s.type === "object" || s.properties !== undefined) return s
  for (const alt of (s.anyOf ?? s.oneOf ?? []) as Schema[])
    if (objectSchema(alt) !== undefined) return objectSchema(alt)
  return undefined
}

/** The schema of an array body's items (an array body, or a union with one), if any. */
function itemsSchema(s: Schema | undefined): Schema | undefined {
  if (s === undefined) return undefined
  if (s.type === "array") return (s.items as Schema | undefined) ?? {}
  for (const alt of (s.anyOf ?? s.oneOf ?? []) as Schema[]) if (itemsSchema(alt) !== undefined) return itemsSchema(alt)
  return undefined
}

/**
 * Where a body can carry a value nested deep: each field the schema names and one it does not (loose
 * objects keep those), a field of the first element of each array of objects among them, and for an
 * array body a field of its first element. A body with no schema (a raw webhook) gets plausible names,
 * at the top and in a first element (webhooks take one event or an array of them).
 */
export function deepSpots(schema: Schema | undefined): Step[][] {
  const fieldsOf = (o: Schema | undefined): Step[][] => {
    const props = Object.entries((o?.properties ?? {}) as Record<string, Schema>)
    const spots: Step[][] = [...props.map(([k]) => [k]), ...DEEP_FIELD_NAMES.map((k) => [k])]
    for (const [k, v] of props) {
      const inner = objectSchema(itemsSchema(v))
      if (inner !== undefined) spots.push(...fieldsOf(inner).map((spot) => [k, 0 as const, ...spot]))
    }
    return spots
  }
  const top = objectSchema(schema)
  const items = schema === undefined ? {} : itemsSchema(schema)
  const spots = top !== undefined || items === undefined || schema === undefined ? fieldsOf(top) : []
  if (items !== undefined) spots.push(...fieldsOf(objectSchema(items)).map((spot) => [0 as const, ...spot]))
  const seen = new Set<string>()
  return spots.filter((spot) => !seen.has(JSON.stringify(spot)) && seen.add(JSON.stringify(spot)))
}

/** `v` with a value `levels` deep at `spot` (made where missing), as JSON text. */
export function withDeep(v: unknown, spot: ReadonlyArray<Step>, levels: number): string {
  const put = (at: unknown, rest: ReadonlyArray<Step>): unknown => {
    if (rest.length === 0) return DEEP_MARK
    const [step, ...more] = rest as [Step, ...Step[]]
    if (step === 0) {
      const list = Array.isArray(at) ? at : []
      return [put(list[0], more), ...list.slice(1)]
    }
    const own = typeof at === "object" && at !== null && !Array.isArray(at) ? (at as Json) : {}
    return { ...own, [step]: put(own[step], more) }
  }
  // Built as text: JSON.stringify itself overflows the stack on a value this deep.
  return JSON.stringify(put(v, spot)).replace(JSON.stringify(DEEP_MARK), nestedText(levels))
}

/** A valid-looking body, then one of the ways of breaking it. */
function jsonBody(schema: Schema | undefined): fc.Arbitrary<{ kind: string; text: string }> {
  const valid = fromSchema(schema)
  const asText = (kind: string) => (v: unknown) => ({ kind, text: JSON.stringify(v) ?? "null" })
  const mutate = (f: (o: Json, key: string, v: unknown) => void, kind: string, value: fc.Arbitrary<unknown>) =>
    fc.tuple(valid, fc.nat(), value).map(([v, i, junk]) => {
      if (typeof v !== "object" || v === null || Array.isArray(v)) return asText(kind)(junk)
      const o = { ...(v as Json) }
      const keys = Object.keys((schema?.properties ?? {}) as Json)
      f(o, keys.length > 0 ? keys[i % keys.length]! : `k${i}`, junk)
      return asText(kind)(o)
    })
  const deep = fc
    .constantFrom(64, 1_000, 100_000)
    .chain((n) => fc.constantFrom(`${"[".repeat(n)}${"]".repeat(n)}`, `${'{"a":'.repeat(n)}1${"}".repeat(n)}`))
  // A valid body with a value nested ~5,000 deep at one of its spots (deepSpots): refused where the
  // body is parsed (422), never a 500 from what walks it (zod, a handler, JSON.stringify to Postgres).
  const spots = deepSpots(schema)
  const deepField = fc
    .tuple(valid, fc.constantFrom(...spots), fc.constantFrom(...DEEP_LEVELS))
    .map(([v, spot, levels]) => ({ kind: "deep-field", text: withDeep(v, spot, levels) }))
  // One string of a valid body given a NUL: Postgres text cannot hold it, so it must be refused.
  const nulString = fc.tuple(valid, fc.nat()).map(([generated, i]) => {
    const v: unknown = JSON.parse(JSON.stringify(generated) ?? "null")
    const leaves: Array<{ holder: Json; key: string | number }> = []
    const walk = (x: unknown) => {
      if (typeof x !== "object" || x === null) return
      for (const [k, y] of Object.entries(x)) {
        if (typeof y === "string") leaves.push({ holder: x as Json, key: Array.isArray(x) ? Number(k) : k })
        else walk(y)
      }
    }
    walk(v)
    const leaf = leaves[i % Math.max(1, leaves.length)]
    if (leaf !== undefined) leaf.holder[leaf.key] = `${String(leaf.holder[leaf.key])}\u0000x`
    return asText("nul-string")(v)
  })
  return fc.oneof(
    { weight: 4, arbitrary: valid.map(asText("valid")) },
    { weight: 2, arbitrary: nulString },
    { weight: 3, arbitrary: mutate((o, k, v) => (o[k] = v), "wrong-type", junkValue) },
    { weight: 2, arbitrary: mutate((o, k, v) => (o[k] = v), "huge-number", fc.constantFrom(...HUGE_NUMBERS)) },
    { weight: 2, arbitrary: mutate((o, k, v) => (o[k] = v), "long-string", longString) },
    { weight: 1, arbitrary: mutate((o, k) => delete o[k], "missing-field", fc.constant(0)) },
    {
      weight: 2,
      arbitrary: mutate((o, _k, v) => Object.assign(o, v), "unknown-fields", fc.dictionary(fc.string(), junkValue)),
    },
    { weight: 2, arbitrary: junkValue.map(asText("junk-json")) },
    { weight: 1, arbitrary: deep.map((text) => ({ kind: "deep-json", text })) },
    { weight: 2, arbitrary: deepField },
    {
      weight: 2,
      arbitrary: fc
        .oneof(
          fc.constantFrom("{", '{"a":', "[1,2", "nul", '{"a":1}}', "\u0000", '{"a":"\\ud800"}', "\ufeff{}", "{'a':1}"),
          fc.string({ maxLength: 200, unit: "binary" }),
          valid.map((v) => (JSON.stringify(v) ?? "").slice(0, -1)),
        )
        .map((text) => ({ kind: "broken-json", text })),
    },
  )
}

const CONTENT_TYPES = [
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data",
  "multipart/form-data; boundary=",
  "application/json; charset=utf-16",
  "application/JSON",
  "application/json, text/plain",
  "*/*",
  "application/xml",
  "a/b/c; ;; =",
]

/** Percent-encodes a string's UTF-8 bytes (a lone surrogate becomes U+FFFD, where encodeURIComponent throws). */
const enc = (s: string): string =>
  Array.from(Buffer.from(s, "utf8"), (b) =>
    /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, "0")}`,
  ).join("")

const headerText = (max: number) => fc.string({ maxLength: max })

/**
 * Junk in the headers Parley reads (under the spec's own names, underscores and all), long headers,
 * and many headers. Past 98 headers the engine answers 431 itself (tested on its own in
 * test/http/fuzz.test.ts), so the fuzzer stays below that and reaches Parley.
 */
const extraHeaders: fc.Arbitrary<{ headers: Record<string, string> }> = fc.oneof(
  { weight: 12, arbitrary: fc.constant({ headers: {} }) },
  {
    weight: 5,
    arbitrary: fc
      .subarray([
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
        "x-request-id",
        "idempotency-key",
        "origin",
        "accept",
        "x-tenant-id",
        "last-event-id",
        "gw_card-signature",
        "x-gw_upi-signature",
        "x-gw_upi-event-id",
        "x-svc-signature",
        "x-telco_a-signature",
        "x-mail_b-signature",
        "range",
        "if-none-match",
      ])
      .chain((names) => fc.tuple(...names.map((n) => headerText(300).map((v) => [n, v] as const))))
      .map((pairs) => ({ headers: Object.fromEntries(pairs) })),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom("x-fuzz", "x-request-id", "idempotency-key", "cookie", "x-forwarded-for", "origin")
      .chain((name) => fc.constantFrom(2_000, 8_000, 16_000, 70_000).map((n) => ({ [name]: "a".repeat(n) })))
      .map((headers) => ({ headers })),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 10, max: 80 }).map((n) => ({
      headers: Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-fuzz-${i}`, "v".repeat(12)])),
    })),
  },
)

const BAD_IDS = [
  "0",
  "-1",
  "1.5",
  "1e3",
  "abc",
  "9223372036854775808",
  "99999999999999999999999999",
  "%00",
  "%2e%2e%2f%2e%2e%2f",
  "%27%20OR%201%3D1",
  "%F0%9F%92%A9",
  "%FF",
  "%",
  "%2B15551234567",
  "+15551234567",
  "%20",
  "0x10",
]

function pathValue(creds: Credentials): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...creds.ids) },
    { weight: 2, arbitrary: fc.integer({ min: 1, max: 60 }).map(String) },
    { weight: 3, arbitrary: fc.constantFrom(...BAD_IDS) },
    { weight: 1, arbitrary: fc.string({ maxLength: 80, unit: "grapheme" }).map(enc) },
    { weight: 1, arbitrary: fc.constantFrom("9".repeat(600), "a".repeat(5000)) },
  )
}

function queryString(op: Operation): fc.Arbitrary<{ kind: string; text: string }> {
  const param = (name: string, schema: Schema) =>
    fc
      .oneof(
        fromSchema(schema).map((v) => (typeof v === "string" ? v : JSON.stringify(v))),
        fc.constantFrom(...HUGE_NUMBERS.map(String), ...NASTY_STRINGS),
        headerText(50),
      )
      .map((v) => `${enc(name)}=${enc(v)}`)
  const params = op.query.map((q) => fc.option(param(q.name, q.schema), { nil: undefined }))
  return fc.oneof(
    { weight: 5, arbitrary: fc.constant({ kind: "", text: "" }) },
    {
      weight: 4,
      arbitrary: fc
        .tuple(...params)
        .map((ps) => ({ kind: "query", text: ps.filter((p) => p !== undefined).join("&") })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom("a=%ZZ", "&&&=&", "limit=1&limit=2", "cursor=%00", `x=${"q".repeat(9000)}`, "%")
        .map((text) => ({ kind: "junk-query", text })),
    },
  )
}

function authKind(op: Operation): fc.Arbitrary<AuthKind> {
  if (op.system) return fc.constantFrom<AuthKind>("system", "system", "none", "garbage", "jwt")
  if (op.authenticated) return fc.constantFrom<AuthKind>("jwt", "jwt", "key", "key", "cookie", "none", "garbage")
  return fc.constantFrom<AuthKind>("none", "none", "jwt", "garbage")
}

function bodyFor(op: Operation): fc.Arbitrary<{ kind: string; text: string | undefined; type: string | undefined }> {
  const jsonSchema = op.body?.["application/json"]
  const takesMultipart = op.body !== undefined && "multipart/form-data" in op.body
  const raw = op.body !== undefined && "*/*" in op.body
  const json = jsonBody(jsonSchema).map((b) => ({ ...b, type: "application/json" as string | undefined }))
  const none = fc.constant({ kind: "no-body", text: undefined, type: undefined })
  const options: Array<fc.WeightedArbitrary<{ kind: string; text: string | undefined; type: string | undefined }>> = [
    { weight: op.body ? 6 : 1, arbitrary: json },
    { weight: 1, arbitrary: none },
    {
      weight: 1,
      arbitrary: fc
        .tuple(jsonBody(jsonSchema), fc.constantFrom<string | undefined>(undefined, ...CONTENT_TYPES))
        .map(([b, type]) => ({ kind: `content-type:${type ?? "none"}`, text: b.text, type })),
    },
  ]
  if (takesMultipart || raw)
    options.push({
      weight: 3,
      arbitrary: fc
        .tuple(fc.string({ maxLength: 2_000, unit: "binary-ascii" }), fc.constantFrom("file", "csv", "x", ""))
        .map(([content, field]) => ({
          kind: "multipart",
          type: "multipart/form-data; boundary=fuzzb",
          text:
            `--fuzzb\r\nContent-Disposition: form-data; name="${field}"; filename="a.csv"\r\n` +
            `Content-Type: text/csv\r\n\r\nphone,name\r\n${content}\r\n--fuzzb--\r\n`,
        })),
    })
  return fc.oneof(...options)
}

/**
 * The request head uWebSockets.js v20.51 takes: a longer one is answered 431 by the engine (and a
 * client still writing may see the connection reset instead).
 */
export const HEAD_LIMIT = 4_096
/** Request line and headers, with room for what the client and the auth add (host, JWT, cookie). */
const headSize = (path: string, headers: Readonly<Record<string, string>>): number =>
  path.length + 700 + Object.entries(headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0)

/**
 * Every operation that takes JSON (or raw bytes), once per spot a value can go (deepSpots), with its
 * own kind of credentials: a value nested 5,000 deep in an otherwise generated body. The random
 * cases reach these spots too, by chance; this makes sure each route has been sent each one.
 */
export function deepCases(ops: ReadonlyArray<Operation>, creds: Credentials, seed: number): Case[] {
  const cases: Case[] = []
  for (const op of ops) {
    if (op.body === undefined || !("application/json" in op.body || "*/*" in op.body)) continue
    const schema = op.body["application/json"]
    const [base] = fc.sample(fromSchema(schema), { numRuns: 1, seed })
    const path = op.template.replace(/\{[^}]+\}/g, () => creds.ids[2] ?? "1")
    const auth: AuthKind = op.system ? "system" : op.authenticated ? "jwt" : "none"
    for (const spot of deepSpots(schema))
      cases.push({
        op: `${op.method} ${op.template}`,
        kind: `deep-field:${spot.join(".")}`,
        method: op.method,
        path,
        auth,
        headers: { "content-type": "application/json" },
        body: withDeep(base, spot, 5_000),
        oversized: false,
      })
  }
  return cases
}

/** Every operation, every way. */
export function caseArb(ops: ReadonlyArray<Operation>, creds: Credentials): fc.Arbitrary<Case> {
  return fc.constantFrom(...ops).chain((op) =>
    fc
      .record({
        prefix: fc.constantFrom("", "", "", "/v1"),
        ids: fc.tuple(...op.pathParams.map(() => pathValue(creds))),
        query: queryString(op),
        body: bodyFor(op),
        auth: authKind(op),
        extra: extraHeaders,
      })
      .map(({ prefix, ids, query, body, auth, extra }): Case => {
        let i = 0
        const path = prefix + op.template.replace(/\{[^}]+\}/g, () => ids[i++] ?? "1")
        const headers: Record<string, string> = { ...extra.headers }
        if (body.type !== undefined) headers["content-type"] = body.type
        const path0 = query.text === "" ? path : `${path}?${query.text}`
        const oversized = headSize(path0, headers) > HEAD_LIMIT
        const kinds = [body.kind, query.kind, oversized ? "oversized-head" : ""].filter((k) => k !== "")
        return {
          op: `${op.method} ${op.template}`,
          kind: kinds.join(","),
          method: op.method,
          path: path0,
          auth,
          headers,
          body: body.text,
          oversized,
        }
      }),
  )
}

// --- sending and judging ------------------------------------------------------------------------

const GARBAGE_AUTH = ["Bearer", "Bearer ", "Bearer x.y.z", "Basic YTpi", "Bearer svc_live_nope", "bearer  a b c"]

function authHeaders(c: Case, creds: Credentials): Record<string, string> {
  switch (c.auth) {
    case "none":
      return {}
    case "jwt":
      return { authorization: `Bearer ${creds.jwt}` }
    case "key":
      return { authorization: `Bearer ${creds.apiKey}` }
    case "cookie":
      return { cookie: creds.cookie, origin: "http://127.0.0.1" }
    case "garbage":
      return { authorization: GARBAGE_AUTH[c.path.length % GARBAGE_AUTH.length]! }
    case "system":
      return { "x-system-key": creds.systemKey, "x-tenant-id": String(creds.tenantId) }
  }
}

export async function send(
  agent: Agent,
  base: string,
  c: Case,
  creds: Credentials,
  timeoutMs: number,
): Promise<Outcome> {
  const started = performance.now()
  const ms = () => Math.round(performance.now() - started)
  const signal = AbortSignal.timeout(timeoutMs)
  try {
    const res = await request(base + c.path, {
      dispatcher: agent,
      method: c.method as "GET",
      headers: { ...c.headers, ...authHeaders(c, creds) },
      ...(c.body !== undefined && c.method !== "GET" && { body: c.body }),
      signal,
    })
    const contentType = String(res.headers["content-type"] ?? "")
    if (contentType.startsWith("text/event-stream")) {
      // A stream stays open by design: its head is the answer. Destroying the body makes undici
      // emit an abort error on it, which is ours and expected, not an unhandled failure.
      res.body.on("error", () => {})
      res.body.destroy()
      return { kind: "answer", status: res.statusCode, contentType, body: "", ms: ms() }
    }
    const body = await res.body.text()
    return { kind: "answer", status: res.statusCode, contentType, body, ms: ms() }
  } catch (e) {
    if (signal.aborted) return { kind: "timeout", ms: ms() }
    return { kind: "closed", message: e instanceof Error ? `${e.name}: ${e.message}` : String(e), ms: ms() }
  }
}

/** A case as a report shows it: long values cut short. */
export function compact(c: Case): Case {
  const cut = (v: string) => (v.length > 120 ? `${v.slice(0, 60)}…(${v.length} chars)` : v)
  const entries = Object.entries(c.headers)
  const headers = Object.fromEntries(
    entries.length > 12
      ? [...entries.slice(0, 3), ["…", `${entries.length} headers`]]
      : entries.map(([k, v]) => [k, cut(v)]),
  )
  return { ...c, path: cut(c.path), headers, body: c.body === undefined ? undefined : cut(c.body) }
}

/**
 * A caller the server does not know (no or garbage credentials) gets its 401 before its body is
 * read, and the connection is closed so the unread bytes go with it (api/server.ts). A body larger
 * than the sockets' buffers is still being written then, so the client's own write fails (EPIPE,
 * or a reset) before it reads the answer: that is the design, not a missing answer. A route that
 * reads its body never makes the client's write fail.
 */
const UNREAD_BODY_BYTES = 64 * 1024
const refusedUnread = (c: Case, message: string): boolean =>
  (c.auth === "garbage" || c.auth === "none") &&
  (c.body?.length ?? 0) > UNREAD_BODY_BYTES &&
  /EPIPE|ECONNRESET|other side closed/.test(message)

/**
 * A body over the server's limit (BODY_LIMIT_BYTES, 1 MiB by default; counted in bytes: a string of
 * 650,000 "é" is 1.3 MB) is answered 413 as soon as its length is known, and the connection closed
 * rather than read to its end: the client's write can fail before it reads the answer.
 */
const BODY_LIMIT_BYTES = 1024 * 1024
const overLimit = (c: Case, message: string): boolean =>
  Buffer.byteLength(c.body ?? "") > BODY_LIMIT_BYTES && /EPIPE|ECONNRESET|other side closed/.test(message)

/** What is wrong with an answer, or undefined. */
export function judge(c: Case, o: Outcome, codes: ReadonlySet<string>): string | undefined {
  if (o.kind === "timeout") return `no answer within ${o.ms} ms`
  if (o.kind === "closed")
    return c.oversized || refusedUnread(c, o.message) || overLimit(c, o.message)
      ? undefined
      : `connection closed without an answer (${o.message})`
  if (o.status >= 500) return `${o.status}: ${o.body.slice(0, 300)}`
  if (!/^application\/(.+\+)?json/.test(o.contentType) || c.method === "HEAD") return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(o.body)
  } catch {
    return `${o.status} says JSON but the body is not: ${o.body.slice(0, 200)}`
  }
  if (o.status < 400) return undefined
  const b = parsed as Json
  if (typeof b !== "object" || b === null || Array.isArray(b)) return `${o.status} error body is not an object`
  if (typeof b.error !== "string" || b.error.length === 0) return `${o.status} error body without error: ${o.body}`
  if (typeof b.code !== "string" || !codes.has(b.code)) return `${o.status} error body with code ${b.code}`
  if ("field" in b && typeof b.field !== "string") return `${o.status} error body with a non-string field`
  return undefined
}

// --- setup --------------------------------------------------------------------------------------

async function jsonCall(base: string, method: string, path: string, body?: unknown, token?: string) {
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(body !== undefined && { "content-type": "application/json" }),
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json }
}

/** A workspace to fuzz as: a user, an admin API key, a workflow; the system key. */
export async function setUp(base: string, systemKey: string): Promise<Credentials & { refresh(): Promise<void> }> {
  const email = `fuzz-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@example.com`
  const password = "correct horse battery staple"
  const signup = await jsonCall(base, "POST", "/auth/signup", { email, password, country: "US" })
  if (signup.status !== 201) throw new Error(`signup ${signup.status}: ${JSON.stringify(signup.body)}`)
  const creds = { jwt: "", cookie: "", apiKey: "", systemKey, tenantId: 0, ids: [] as string[] }
  const login = async () => {
    const res = await jsonCall(base, "POST", "/auth/login", { email, password })
    if (res.status !== 200) throw new Error(`login ${res.status}: ${JSON.stringify(res.body)}`)
    creds.jwt = res.body.token
    creds.cookie = res.headers.get("set-cookie")!.split(";")[0]!
    creds.tenantId = res.body.tenant.id
  }
  const newKey = async () => {
    const res = await jsonCall(base, "POST", "/api-keys", { name: "fuzz", scope: "admin" }, creds.jwt)
    if (res.status !== 201) throw new Error(`api key ${res.status}: ${JSON.stringify(res.body)}`)
    creds.apiKey = res.body.secret
    return res.body.id as number
  }
  await login()
  const keyId = await newKey()
  const wf = await jsonCall(base, "POST", "/api/workflows", { nl_prompt: "Call lapsed members." }, creds.jwt)
  creds.ids.push(String(keyId), String(creds.tenantId), String(wf.body.id ?? 1), "1", "2")
  return Object.assign(creds, {
    /** Signs in again or makes a new key when a case logged out or revoked the one in use. */
    async refresh() {
      if ((await jsonCall(base, "GET", "/auth/me", undefined, creds.jwt)).status === 401) await login()
      if ((await jsonCall(base, "GET", "/billing/balance", undefined, creds.apiKey)).status === 401) await newKey()
    },
  })
}

// --- the run --------------------------------------------------------------------------------------

/** Sends `requests` fuzzed requests, `concurrency` at a time, and reports what was wrong. */
export async function fuzz(opts: FuzzOptions): Promise<FuzzReport> {
  const started = performance.now()
  const concurrency = opts.concurrency ?? 8
  const timeoutMs = opts.timeoutMs ?? 10_000
  const doc = (await (await fetch(`${opts.base}/openapi.json`)).json()) as Json
  const codes = new Set<string>(doc.components.schemas.ErrorCode.enum as string[])
  const ops = operationsOf(doc)
  const creds = await setUp(opts.base, opts.systemKey)
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000, pipelining: 0 })
  const byStatus: Record<string, number> = {}
  const violations: Violation[] = []
  const seen = new Set<string>()
  const rss: Array<readonly [number, number]> = [[0, rssOf(opts.pid)]]
  let sent = 0
  let nextSample = 250
  const slowest: Array<readonly [string, number]> = []

  const batch = fc.array(caseArb(ops, creds), { minLength: concurrency, maxLength: concurrency })
  const look = (cases: ReadonlyArray<Case>, outcomes: ReadonlyArray<Outcome>) =>
    cases.forEach((c, i) => {
      const o = outcomes[i]!
      const label = o.kind === "answer" ? String(o.status) : o.kind
      if (slowest.length < 10 || o.ms > slowest.at(-1)![1]) {
        slowest.push([`${c.op} (${c.kind}) ${label}`, o.ms])
        slowest.sort((x, y) => y[1] - x[1]).splice(10)
      }
      byStatus[label] = (byStatus[label] ?? 0) + 1
      const problem = judge(c, o, codes)
      if (problem === undefined) return
      // One report per operation and problem: the first case that shows it.
      const id = `${c.op} ${problem.slice(0, 40)}`
      if (seen.has(id)) return
      seen.add(id)
      violations.push({ problem, case: compact(c) })
    })
  try {
    // Each route with a body, a deep value at each of its spots, before the random cases.
    const deep = deepCases(ops, creds, opts.seed)
    for (let i = 0; i < deep.length; i += concurrency) {
      const cases = deep.slice(i, i + concurrency)
      look(cases, await Promise.all(cases.map((c) => send(agent, opts.base, c, creds, timeoutMs))))
    }
    sent += deep.length
    await fc.assert(
      fc.asyncProperty(batch, async (cases) => {
        look(cases, await Promise.all(cases.map((c) => send(agent, opts.base, c, creds, timeoutMs))))
        sent += cases.length
        if (sent >= nextSample) {
          nextSample += 250
          const now = rssOf(opts.pid)
          rss.push([sent, now])
          opts.onProgress?.(sent, now)
          await creds.refresh()
        }
        return true
      }),
      { numRuns: Math.ceil(opts.requests / concurrency), seed: opts.seed, endOnFailure: true },
    )
  } finally {
    await agent.close()
  }
  return { sent, byStatus, violations, rss, seed: opts.seed, ms: Math.round(performance.now() - started), slowest }
}

/**
 * RSS growth over the second half of the run, as a leak would show it: the lowest sample of its last
 * quarter against the lowest of its third, unless one step explains it. Troughs, not peaks: the heap
 * swells and shrinks with the collector's pace. And a leak raises every interval between samples,
 * while the embedded database's WebAssembly memory grows in one-off steps of about a fifth of itself
 * that it never gives back (CI once saw 115 MiB at once, flat before and after): so the growth is at
 * most the median interval's, times the intervals.
 */
export function rssGrowth(rss: ReadonlyArray<readonly [number, number]>): number {
  const q = Math.max(1, Math.floor(rss.length / 4))
  const troughs = Math.min(...rss.slice(rss.length - q).map(([, b]) => b)) - warmLow(rss)
  const half = rss.slice(Math.floor(rss.length / 2))
  const steps = half
    .slice(1)
    .map(([, b], i) => b - half[i]![1])
    .sort((x, y) => x - y)
  if (steps.length < 2) return troughs
  const median = steps[Math.floor(steps.length / 2)]!
  return Math.min(troughs, Math.max(0, median) * steps.length)
}

/** The lowest RSS of the run's third quarter, well past warm-up. */
export function warmLow(rss: ReadonlyArray<readonly [number, number]>): number {
  const q = Math.max(1, Math.floor(rss.length / 4))
  const third = rss.slice(2 * q, 3 * q).map(([, b]) => b)
  return Math.min(...(third.length > 0 ? third : [rss[0]![1]]))
}
