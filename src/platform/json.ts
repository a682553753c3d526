// json: JSON from outside (request and webhook bodies, fetched rows) parsed with a bound on how deep
// arrays and objects nest, so nothing that walks the value afterwards (zod, JSON.stringify, a
// recursive helper) can overflow the stack. The bound is checked on the text, before JSON.parse.
import { BadRequestBody, ValidationFailed } from "./errors.js"

/** How deeply arrays and objects may nest in JSON from outside (the top-level value is level 1). */
export const MAX_JSON_DEPTH = 64

/** Where in a JSON value a step down was taken: an object's key or an array's index. */
export type JsonPath = ReadonlyArray<string | number>

export type ParsedJson =
  | { readonly ok: true; readonly value: unknown }
  /** Not JSON: JSON.parse's message. */
  | { readonly ok: false; readonly reason: "syntax"; readonly message: string }
  /** Nested past the bound: the path to the array or object that went one level too deep. */
  | { readonly ok: false; readonly reason: "depth"; readonly path: JsonPath }

/**
 * `text` parsed, unless its arrays and objects nest deeper than `maxDepth`. The depth is read from
 * the text first (linear, stops at the first level too deep), so a body of a million "[" costs
 * microseconds and builds nothing; text nested too deep is refused even if it is also malformed.
 */
export function parseJson(text: string, maxDepth: number = MAX_JSON_DEPTH): ParsedJson {
  const path = tooDeepAt(text, maxDepth)
  if (path !== undefined) return { ok: false, reason: "depth", path }
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (e) {
    return { ok: false, reason: "syntax", message: (e as Error).message }
  }
}

/**
 * A JSON body from a request (`what` names it in the message): its value, 400 BAD_JSON when it is
 * not JSON, or the contract's 422 when it nests too deep (tooDeepFailure).
 */
export function jsonBody(text: string, what: string): { readonly value: unknown } | BadRequestBody | ValidationFailed {
  const parsed = parseJson(text)
  if (parsed.ok) return { value: parsed.value }
  if (parsed.reason === "depth") return tooDeepFailure(parsed.path)
  return new BadRequestBody({ code: "BAD_JSON", message: `${what} is not valid JSON: ${parsed.message}` })
}

/** A short message for a value nested too deep. */
export const tooDeepMessage = (maxDepth: number = MAX_JSON_DEPTH): string =>
  `must not nest arrays and objects more than ${maxDepth} levels deep`

/**
 * The contract's 422 for a request body nested too deep. The field is the top-level property (or
 * array index) under which it went too deep, as a client's form names it ("body" when there is
 * none); a name past 200 characters is cut short, so the answer does not echo a huge key.
 */
export function tooDeepFailure(path: JsonPath, maxDepth: number = MAX_JSON_DEPTH): ValidationFailed {
  const top = path.length > 0 ? String(path[0]) : "body"
  const field = top.length > 200 ? `${top.slice(0, 200)}…` : top
  const message = tooDeepMessage(maxDepth)
  return new ValidationFailed({ message: `invalid request body: ${field}: ${message}`, errors: [{ field, message }] })
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d

/**
 * The path to the first array or object in `text` that opens more than `maxDepth` levels deep,
 * or undefined when none does. One pass over the text with one frame per open level (at most
 * `maxDepth` of them), no recursion. Only brackets, commas and strings are read: anything else,
 * valid or not, is left for JSON.parse to judge.
 */
export function tooDeepAt(text: string, maxDepth: number = MAX_JSON_DEPTH): JsonPath | undefined {
  // Per open level: whether it is an object, and the step taken in it so far (an array's index;
  // an object's key as the [start, end) of its quoted text, decoded only if it is reported).
  const isObject = new Uint8Array(maxDepth)
  const index = new Int32Array(maxDepth)
  const keyStart = new Int32Array(maxDepth)
  const keyEnd = new Int32Array(maxDepth)
  let depth = 0
  let expectKey = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const end = stringEnd(text, i)
      if (expectKey) {
        keyStart[depth - 1] = i
        keyEnd[depth - 1] = end + 1
        expectKey = false
      }
      i = end
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (depth >= maxDepth) return pathOf(text, depth, isObject, index, keyStart, keyEnd)
      isObject[depth] = c === OPEN_OBJECT ? 1 : 0
      index[depth] = 0
      keyStart[depth] = -1
      depth++
      expectKey = c === OPEN_OBJECT
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      if (depth > 0) depth--
      expectKey = false
    } else if (c === COMMA && depth > 0) {
      if (isObject[depth - 1] === 1) expectKey = true
      else index[depth - 1]!++
    }
  }
  return undefined
}

/** The index of the quote that closes the string opened at `start` (text.length when none does). */
function stringEnd(text: string, start: number): number {
  let at = start
  for (;;) {
    at = text.indexOf('"', at + 1)
    if (at === -1) return text.length
    // Escaped when an odd number of backslashes runs up to it (each run is counted once: linear).
    let backslashes = 0
    for (let k = at - 1; text.charCodeAt(k) === BACKSLASH; k--) backslashes++
    if (backslashes % 2 === 0) return at
  }
}

function pathOf(
  text: string,
  depth: number,
  isObject: Uint8Array,
  index: Int32Array,
  keyStart: Int32Array,
  keyEnd: Int32Array,
): JsonPath {
  const path: Array<string | number> = []
  for (let level = 0; level < depth; level++)
    path.push(isObject[level] === 1 ? keyText(text, keyStart[level]!, keyEnd[level]!) : index[level]!)
  return path
}

/** An object key's text, unescaped ("" before the first key is read). */
function keyText(text: string, start: number, end: number): string {
  if (start < 0) return ""
  const quoted = text.slice(start, end)
  try {
    const key: unknown = JSON.parse(quoted)
    if (typeof key === "string") return key
  } catch {
    // An unterminated or badly escaped key: reported as written.
  }
  return quoted.slice(1, quoted.endsWith('"') && quoted.length > 1 ? -1 : undefined)
}
