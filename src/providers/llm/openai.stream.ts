// Reading an OpenAI-compatible streamed chat completion: the Server-Sent Events' lines and data within
// length bounds, the completion's deltas, and a reply's spoken text picked out of its JSON as it is written.

import { LlmCallError } from "./llm.interface.js"

// ---------------------------------------------------------------------------------------------
// Server-Sent Events

/**
 * The longest SSE line (and event) read. A completion's chunk is a few hundred bytes; a line that
 * never ends is a fault or an attack, and must not grow memory without bound.
 */
export const MAX_SSE_LINE_BYTES = 64 * 1024

const LF = 0x0a
const CR = 0x0d

const tooLong = (what: string) => new LlmCallError(`language model API sent a stream ${what} (cut off)`, false)
const lineTooLong = (max: number) => tooLong(`line longer than ${max} bytes`)

/**
 * The lines of an SSE body, ended by LF, CRLF or CR, each decoded as UTF-8 once whole (so a chunk may
 * end anywhere: inside a line, between CR and LF, inside a character). A line longer than
 * `maxLineBytes` rejects with a non-retryable LlmCallError as soon as it is, never held whole; an
 * unended last line is dropped, as the SSE standard drops an unended event (the body was cut off).
 */
export async function* sseLines(
  body: AsyncIterable<Uint8Array>,
  maxLineBytes = MAX_SSE_LINE_BYTES,
): AsyncGenerator<string, void, undefined> {
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true })
  let held: Uint8Array[] = []
  let heldBytes = 0
  let afterCr = false
  let first = true
  const line = (tail: Uint8Array): string => {
    if (heldBytes + tail.byteLength > maxLineBytes) throw lineTooLong(maxLineBytes)
    const bytes = held.length === 0 ? tail : Buffer.concat([...held, tail])
    held = []
    heldBytes = 0
    const text = decoder.decode(bytes)
    // A byte-order mark is allowed once, before the stream's first line.
    const bom = first && text.startsWith("\uFEFF")
    first = false
    return bom ? text.slice(1) : text
  }
  for await (const chunk of body) {
    let start = 0
    for (let i = 0; i < chunk.byteLength; i++) {
      const b = chunk[i]
      if (b === LF && afterCr) {
        // The LF of a CRLF whose CR ended the line already (possibly in the previous chunk).
        afterCr = false
        start = i + 1
        continue
      }
      afterCr = b === CR
      if (b !== LF && b !== CR) continue
      yield line(chunk.subarray(start, i))
      start = i + 1
    }
    if (start < chunk.byteLength) {
      heldBytes += chunk.byteLength - start
      if (heldBytes > maxLineBytes) throw lineTooLong(maxLineBytes)
      // Copied: the stream may reuse its chunk's memory once it is handed on.
      held.push(chunk.slice(start))
    }
  }
}

/**
 * Each event's data, its `data:` lines joined by LF (the standard's rule), from SSE lines: comment
 * lines (`: keep-alive`) and other fields (`event:`, `id:`, `retry:`) are skipped, and an event with
 * no data is not one. An event pending when the lines end is given too: its lines were whole, only
 * the blank line after them is missing. An event's data is held to `maxChars`, as a line is.
 */
export async function* sseData(
  lines: AsyncIterable<string>,
  maxChars = MAX_SSE_LINE_BYTES,
): AsyncGenerator<string, void, undefined> {
  let data: string[] = []
  let size = 0
  for await (const line of lines) {
    if (line === "") {
      if (data.length > 0) yield data.join("\n")
      data = []
      size = 0
      continue
    }
    if (line.startsWith(":")) continue
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    if (field !== "data") continue
    const value = colon === -1 ? "" : line.slice(line[colon + 1] === " " ? colon + 2 : colon + 1)
    size += value.length + 1
    if (size > maxChars) throw tooLong(`event longer than ${maxChars} characters`)
    data.push(value)
  }
  if (data.length > 0) yield data.join("\n")
}

// ---------------------------------------------------------------------------------------------
// A streamed chat completion

/** What one chunk of a streamed completion adds: pieces of the answer's content and of a refusal. */
export interface ChatDelta {
  readonly content: string
  readonly refusal: string
}

/** A streamed completion once its data has ended. */
export interface ChatStreamEnd {
  /** The answer's content, its pieces joined. */
  readonly content: string
  readonly refusal: string
  /** The first choice's finish_reason ("stop", "length", …), null when none came. */
  readonly finishReason: string | null
  /** Whether the stream said `[DONE]`; without it, the body simply ended. */
  readonly done: boolean
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * Reads a streamed chat completion's events: `onDelta` gets each chunk's delta of the first choice
 * (empty strings for a chunk without one: a role, a usage report, a finish), and the whole is given
 * back when the data ends or says `[DONE]` (anything after it is not read). An error object in the
 * stream rejects with a retryable LlmCallError (the server failed while answering, as a 5xx does);
 * `scrub` cleans its message first. An event that is not a JSON object rejects, not retryable.
 */
export async function readChatStream(
  data: AsyncIterable<string>,
  onDelta: (delta: ChatDelta) => void,
  scrub: (text: string) => string,
): Promise<ChatStreamEnd> {
  let content = ""
  let refusal = ""
  let finishReason: string | null = null
  for await (const event of data) {
    if (event.trim() === "[DONE]") return { content, refusal, finishReason, done: true }
    let chunk: unknown
    try {
      chunk = JSON.parse(event)
    } catch {
      chunk = undefined
    }
    if (!isObject(chunk))
      throw new LlmCallError("language model API sent a stream event that is not a JSON object", false)
    if (chunk.error !== undefined && chunk.error !== null) {
      const err = chunk.error
      const said = isObject(err) && typeof err.message === "string" ? err.message : JSON.stringify(err)
      const code = isObject(err) && typeof err.code === "string" ? `${err.code}: ` : ""
      const detail = scrub(`${code}${said}`).replace(/\s+/g, " ").trim().slice(0, 200)
      throw new LlmCallError(`language model API failed in the middle of its answer: ${detail}`, true)
    }
    const choices = chunk.choices
    const choice: unknown = Array.isArray(choices) ? choices[0] : undefined
    const delta = isObject(choice) && isObject(choice.delta) ? choice.delta : {}
    const piece = {
      content: typeof delta.content === "string" ? delta.content : "",
      refusal: typeof delta.refusal === "string" ? delta.refusal : "",
    }
    if (isObject(choice) && typeof choice.finish_reason === "string") finishReason = choice.finish_reason
    content += piece.content
    refusal += piece.refusal
    onDelta(piece)
  }
  return { content, refusal, finishReason, done: false }
}

// ---------------------------------------------------------------------------------------------
// The reply's text, as the model writes it

type FieldState = "object" | "key" | "name" | "colon" | "value" | "text" | "ended" | "absent"

const JSON_SPACE = new Set([" ", "\t", "\n", "\r"])
const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
}
const HEX = /^[0-9a-fA-F]$/
const isHighSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff

/**
 * The value of a JSON object's `"text"` string, decoded as the object's text arrives in pieces, when
 * `text` is the object's first key (a reply's schema puts it first; strict structured output keeps
 * that order). push() returns the characters a piece completes: an escape split between pieces
 * (`\u00`|`e9`) is returned once whole, and a high surrogate waits for what follows it so a
 * character is never returned in halves. Nothing is returned after the closing quote, nor at all
 * when the first key is another, nor any more once the text is seen not to be JSON (a bad escape):
 * the caller has the whole answer at the end, and judges it.
 */
export class LeadingTextField {
  #state: FieldState = "object"
  /** The first key as far as it is read (at most five units: enough to know it is not "text"). */
  #name = ""
  /** An escape begun: "" after the backslash, then "u", "u0", … up to "uXXXX"; null when none. */
  #escape: string | null = null
  /** Decoded text not yet returned: a trailing high surrogate. */
  #held = ""

  /** "streaming": inside the text; "ended": its closing quote was read; "absent": there is none to stream. */
  get state(): "pending" | "streaming" | "ended" | "absent" {
    return this.#state === "text"
      ? "streaming"
      : this.#state === "ended" || this.#state === "absent"
        ? this.#state
        : "pending"
  }

  push(piece: string): string {
    let out = this.#held
    this.#held = ""
    let i = 0
    while (i < piece.length && this.#state !== "ended" && this.#state !== "absent") {
      if (this.#state === "text" && this.#escape === null) {
        // Plain characters in bulk, up to the next quote or backslash.
        let j = i
        while (j < piece.length && piece[j] !== '"' && piece[j] !== "\\") j++
        out += piece.slice(i, j)
        i = j
        if (i === piece.length) break
      }
      const c = piece[i]!
      i++
      switch (this.#state) {
        case "object":
          if (!JSON_SPACE.has(c)) this.#state = c === "{" ? "key" : "absent"
          break
        case "key":
          if (!JSON_SPACE.has(c)) this.#state = c === '"' ? "name" : "absent"
          break
        case "colon":
          if (!JSON_SPACE.has(c)) this.#state = c === ":" ? "value" : "absent"
          break
        case "value":
          if (!JSON_SPACE.has(c)) this.#state = c === '"' ? "text" : "absent"
          break
        case "name":
        case "text": {
          const decoded = this.#stringUnit(c)
          if (decoded === undefined) break
          if (this.#state === "name") {
            this.#name += decoded
            if (this.#name.length > 4) this.#state = "absent"
          } else out += decoded
          break
        }
      }
    }
    // A character split in two waits for its second half (unless the text has ended on the first).
    if (this.#state === "text" && out.length > 0 && isHighSurrogate(out.charCodeAt(out.length - 1))) {
      this.#held = out.slice(-1)
      out = out.slice(0, -1)
    }
    return this.#state === "absent" ? "" : out
  }

  /** One unit inside a string: what it decodes to, or undefined (an escape unfinished, the string's end). */
  #stringUnit(c: string): string | undefined {
    const begun = this.#escape
    if (begun === null) {
      if (c === "\\") this.#escape = ""
      else if (c === '"') this.#state = this.#state === "name" ? (this.#name === "text" ? "colon" : "absent") : "ended"
      else return c
      return undefined
    }
    if (begun === "") {
      if (c === "u") this.#escape = "u"
      else if (SIMPLE_ESCAPES[c] !== undefined) {
        this.#escape = null
        return SIMPLE_ESCAPES[c]
      } else this.#state = "absent"
      return undefined
    }
    if (!HEX.test(c)) {
      this.#state = "absent"
      return undefined
    }
    if (begun.length < 4) {
      this.#escape = begun + c
      return undefined
    }
    this.#escape = null
    return String.fromCharCode(Number.parseInt(begun.slice(1) + c, 16))
  }
}

/** A reply's text as spoken: each run of whitespace one space, trimmed, at most `max` UTF-16 units. */
export const spokenText = (text: string, max: number): string => text.replace(/\s+/g, " ").trim().slice(0, max)

const SPACE = /\s/

/**
 * spokenText, as the raw text arrives in pieces: push() returns what the spoken text gains, so the
 * pieces returned, joined, are always the start of spokenText(everything pushed) and, once the raw
 * text is complete, all of it. Whitespace is held back until a character follows it (a trailing
 * run is trimmed), and nothing past `max` is returned.
 */
export class SpokenTextStream {
  #length = 0
  /** Whitespace came after something was returned: one space is due before the next character. */
  #space = false

  constructor(private readonly max: number) {}

  push(raw: string): string {
    let out = ""
    for (let i = 0; i < raw.length && this.#length + out.length < this.max; i++) {
      const c = raw[i]!
      if (SPACE.test(c)) {
        if (this.#length + out.length > 0) this.#space = true
        continue
      }
      if (this.#space) out += " "
      this.#space = false
      out += c
    }
    out = out.slice(0, this.max - this.#length)
    this.#length += out.length
    return out
  }
}
