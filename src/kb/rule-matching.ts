// The matching of a call's knowledge-base rules, every turn: is a line banned, which rules does a
// callee line call for. The conversation loop does it for any model, and gives the model what it
// decided as data (llm.interface.ts's AgentRules, TriggeredRule). A run's rules are compiled once
// (normalised, indexed by a word's hash); each call fills in its callee's name only where a line
// needs it; a turn costs a hash look-up per word said, not a test per rule.
import { type AgentRule, fillPlaceholders, type TriggeredRule } from "../providers/llm/llm.interface.js"

/** The bucket whose rules forbid a line: the rule's body is the line never to say. */
export const BANNED_BUCKET = "banned_phrases"
/** The bucket whose highest-priority rule replaces the rule book's opening line. */
export const OPENING_BUCKET = "opening"

/**
 * A run's rules compiled once (the runtime hands every call the same array until the rules
 * change): sorted, banned lines normalised with their placeholders kept as marker words, trigger
 * phrases normalised, everything indexed by a word. Nothing here depends on the callee.
 */
interface Compiled {
  readonly sorted: ReadonlyArray<AgentRule>
  /** Banned lines, normalised, placeholders as marker words. */
  readonly banned: ReadonlyArray<string>
  /** Each banned line padded by spaces when it has no placeholder (the same on every call). */
  readonly bannedPadded: ReadonlyArray<string | undefined>
  /** Banned lines by the hash (wordHash) of one of their words, the longest without a placeholder. */
  readonly bannedIndex: ReadonlyMap<number, ReadonlyArray<number>>
  /** A bitset of bannedIndex's keys: most words said are ruled out without a map look-up. */
  readonly bannedBits: Uint32Array
  /** Banned lines with no word free of placeholders: checked on every line. */
  readonly bannedAlways: ReadonlyArray<number>
  readonly triggered: ReadonlyArray<{
    readonly rule: AgentRule
    readonly phrases: ReadonlyArray<string>
    readonly category: string | null
  }>
  /** Trigger phrases padded by spaces, by their longest word's hash; `ref` is the rule's place in `triggered`. */
  readonly phraseIndex: ReadonlyMap<number, ReadonlyArray<{ readonly padded: string; readonly ref: number }>>
  readonly phraseBits: Uint32Array
  /** The first (highest-priority) place in `triggered` of each trigger category. */
  readonly categoryFirst: ReadonlyMap<string, number>
  readonly opening: AgentRule | undefined
}

// Placeholders inside a normalised banned line: words normaliseLine keeps and nobody says.
const MARK = { name: "zqxcallee", agent_name: "zqxagent", company: "zqxcompany" } as const
const MARKS = /zqxcallee|zqxagent|zqxcompany/g
const hasMark = (word: string): boolean => word.includes("zqx")
/** Never found in a padded line: what an empty banned line compares as. */
const NOTHING = "\u0000"
/** No place in a rule list: what a search for none starts from. */
const NONE = Number.POSITIVE_INFINITY

const compiledOf = new WeakMap<ReadonlyArray<AgentRule>, Compiled>()

function compile(rules: ReadonlyArray<AgentRule>): Compiled {
  const known = compiledOf.get(rules)
  if (known !== undefined) return known
  const sorted = [...rules].sort(byPriority)
  const banned: string[] = []
  const bannedPadded: Array<string | undefined> = []
  const bannedIndex = new Map<number, number[]>()
  const bannedAlways: number[] = []
  const triggered: Array<Compiled["triggered"][number]> = []
  const phraseIndex = new Map<number, Array<{ padded: string; ref: number }>>()
  const categoryFirst = new Map<string, number>()
  let opening: AgentRule | undefined
  for (const r of sorted) {
    if (r.bucket === BANNED_BUCKET) {
      const line = normaliseLine(r.body.replace(/\{(name|agent_name|company)\}/g, (_, k: keyof typeof MARK) => MARK[k]))
      if (line === "") continue
      const ref = banned.push(line) - 1
      bannedPadded.push(hasMark(line) ? undefined : ` ${line} `)
      // Filed under its longest plain word: long words are rare, so few lines said reach a test.
      const key = longestWord(line, (w) => !hasMark(w))
      if (key === "") bannedAlways.push(ref)
      else push(bannedIndex, wordHash(key), ref)
      continue
    }
    if (r.bucket === OPENING_BUCKET && opening === undefined && r.body.trim() !== "") opening = r
    if (r.trigger === null) continue
    const phrases = r.trigger.phrases.map(normaliseLine).filter((p) => p !== "")
    const category = r.trigger.category
    if (phrases.length === 0 && category === null) continue
    const ref = triggered.push({ rule: r, phrases, category }) - 1
    for (const p of phrases) push(phraseIndex, wordHash(longestWord(p)), { padded: ` ${p} `, ref })
    if (category !== null && !categoryFirst.has(category)) categoryFirst.set(category, ref)
  }
  const compiled = {
    sorted,
    banned,
    bannedPadded,
    bannedIndex,
    bannedBits: bitsOf(bannedIndex),
    bannedAlways,
    triggered,
    phraseIndex,
    phraseBits: bitsOf(phraseIndex),
    categoryFirst,
    opening,
  }
  compiledOf.set(rules, compiled)
  return compiled
}

/** The longest word of a normalised line that `ok` accepts (the first on a tie); "" for none. */
function longestWord(line: string, ok: (word: string) => boolean = () => true): string {
  let key = ""
  for (const w of line.split(" ")) if (w.length > key.length && ok(w)) key = w
  return key
}

const BIT_WORDS = 256 // 8,192 bits: a few per cent of them set by hundreds of keys

function bitsOf(index: ReadonlyMap<number, unknown>): Uint32Array {
  const bits = new Uint32Array(BIT_WORDS)
  for (const h of index.keys()) bits[(h >>> 5) & (BIT_WORDS - 1)]! |= 1 << (h & 31)
  return bits
}

function push<T>(index: Map<number, T[]>, key: number, value: T): void {
  const list = index.get(key)
  if (list === undefined) index.set(key, [value])
  else list.push(value)
}

type CallVars = { readonly name: string | null; readonly agentName: string; readonly company: string }

/**
 * A call's rules, ready for matching: highest priority first, placeholders filled for this callee.
 * A call costs next to nothing to prepare (the run's rules are compiled once); a line's
 * placeholders are filled the first time a turn needs that line.
 */
export class CallRules {
  private readonly filledRules = new Map<AgentRule, AgentRule>()
  private readonly callPadded: Array<string | undefined> = []
  private vars: { name: string; agent: string; company: string } | undefined
  /** The last line judged: the loop's guard asks again about the line the model just checked. */
  private lastText: string | undefined
  private lastBanned = false

  constructor(
    private readonly c: Compiled,
    private readonly who: CallVars,
  ) {}

  /** How many banned lines apply (cheap: nothing is filled). */
  get bannedCount(): number {
    return this.c.banned.length
  }

  /** Every rule, body filled for this call, highest priority first. */
  get rules(): ReadonlyArray<AgentRule> {
    return this.c.sorted.map((r) => this.filled(r))
  }

  /** The banned lines, filled and normalised. */
  get banned(): ReadonlyArray<string> {
    return this.c.banned.map((_, i) => {
      const line = this.bannedLine(i)
      return line === NOTHING ? "" : line.trim()
    })
  }

  /** Rules with a trigger (other than banned lines), highest priority first, phrases normalised. */
  get triggered(): ReadonlyArray<{ rule: AgentRule; phrases: ReadonlyArray<string>; category: string | null }> {
    return this.c.triggered.map((t) => ({ rule: this.filled(t.rule), phrases: t.phrases, category: t.category }))
  }

  /** The opening line the highest-priority `opening` rule gives, if any (filled). */
  get opening(): string | undefined {
    const o = this.c.opening
    return o === undefined ? undefined : this.filled(o).body.trim() || undefined
  }

  /** See isBanned. */
  says(text: string): boolean {
    const c = this.c
    if (c.banned.length === 0) return false
    if (text === this.lastText) return this.lastBanned
    // Most lines say no banned line's key word: hashing the words decides that without a copy.
    const n = hashWords(text)
    let banned = false
    if (c.bannedAlways.length > 0 || anyIn(c.bannedBits, n)) {
      const padded = ` ${normaliseLine(text)} `
      for (const ref of c.bannedAlways) if (padded.includes(this.bannedLine(ref))) banned = true
      for (let i = 0; i < n && !banned; i++) {
        const refs = c.bannedIndex.get(HASHES[i]!)
        if (refs !== undefined) for (const ref of refs) if (padded.includes(this.bannedLine(ref))) banned = true
      }
    }
    this.lastText = text
    this.lastBanned = banned
    return banned
  }

  /** See ruleFor. */
  ruleFor(heard: string, category: string | null): AgentRule | undefined {
    const c = this.c
    if (c.triggered.length === 0) return undefined
    const byCategory = category === null ? undefined : c.categoryFirst.get(category)
    const t = c.triggered[this.saidRef(heard, byCategory ?? NONE)]
    return t === undefined ? undefined : this.filled(t.rule)
  }

  /**
   * What a model is given to choose ruleFor's answer by judging the category itself: each
   * category's first rule that outranks the best rule whose phrase `heard` says, then that rule.
   */
  triggeredBy(heard: string): ReadonlyArray<TriggeredRule> {
    const c = this.c
    if (c.triggered.length === 0) return []
    const said = this.saidRef(heard, NONE)
    const out: TriggeredRule[] = []
    // Filled in rule order, so the categories come highest priority first.
    for (const [category, ref] of c.categoryFirst) {
      if (ref >= said) break
      out.push({ rule: this.filled(c.triggered[ref]!.rule), category })
    }
    const t = c.triggered[said]
    if (t !== undefined) out.push({ rule: this.filled(t.rule), category: null })
    return out
  }

  /** The first place in `triggered`, before `below`, of a rule whose phrase `heard` says; else `below`. */
  private saidRef(heard: string, below: number): number {
    const c = this.c
    let best = below
    const n = c.phraseIndex.size > 0 ? hashWords(heard) : 0
    if (anyIn(c.phraseBits, n)) {
      const padded = ` ${normaliseLine(heard)} `
      for (let i = 0; i < n; i++) {
        const entries = c.phraseIndex.get(HASHES[i]!)
        if (entries !== undefined) for (const e of entries) if (e.ref < best && padded.includes(e.padded)) best = e.ref
      }
    }
    return best
  }

  private filled(r: AgentRule): AgentRule {
    let f = this.filledRules.get(r)
    if (f === undefined) this.filledRules.set(r, (f = { ...r, body: fillPlaceholders(r.body, this.who) }))
    return f
  }

  /** Banned line `ref` for this callee, normalised and padded by spaces. */
  private bannedLine(ref: number): string {
    const fixed = this.c.bannedPadded[ref]
    if (fixed !== undefined) return fixed
    const known = this.callPadded[ref]
    if (known !== undefined) return known
    this.vars ??= {
      name: normaliseLine(this.who.name ?? ""),
      agent: normaliseLine(this.who.agentName),
      company: normaliseLine(this.who.company),
    }
    const v = this.vars
    let line = this.c.banned[ref]!.replace(MARKS, (m) =>
      m === MARK.name ? v.name : m === MARK.agent_name ? v.agent : v.company,
    )
    if (v.name === "" || v.agent === "" || v.company === "") line = line.replace(/ {2,}/g, " ").trim()
    const padded = line === "" ? NOTHING : ` ${line} `
    this.callPadded[ref] = padded
    return padded
  }
}

// normaliseLine's fast path: the ASCII characters a line keeps (letters, digits, ' $ %).
const KEEP = new Uint8Array(128)
for (let c = 48; c <= 57; c++) KEEP[c] = 1
for (let c = 97; c <= 122; c++) KEEP[c] = 1
for (const c of "'$%") KEEP[c.charCodeAt(0)] = 1

// Word hashes of the line last passed to hashWords (a turn is synchronous: one buffer serves all).
let HASHES = new Int32Array(64)
const FNV_OFFSET = 0x811c9dc5 | 0
const FNV_PRIME = 0x01000193

/** FNV-1a over a normalised word's code units: the key its index entries are filed under. */
function wordHash(word: string): number {
  let h = FNV_OFFSET
  for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), FNV_PRIME)
  return h
}

/**
 * Fills HASHES with the hash of each word of `text` as normaliseLine would split it, and answers
 * how many; plain ASCII in one pass without building the normalised line.
 */
function hashWords(text: string): number {
  let n = 0
  let h = FNV_OFFSET
  let inWord = false
  for (let i = 0; i < text.length; i++) {
    let ch = text.charCodeAt(i)
    if (ch >= 128) return hashNormalised(normaliseLine(text))
    if (ch >= 65 && ch <= 90) ch += 32
    if (KEEP[ch] === 1) {
      h = Math.imul(h ^ ch, FNV_PRIME)
      inWord = true
    } else if (inWord) {
      n = addHash(n, h)
      h = FNV_OFFSET
      inWord = false
    }
  }
  return inWord ? addHash(n, h) : n
}

function hashNormalised(line: string): number {
  let n = 0
  let start = 0
  while (start < line.length) {
    let end = line.indexOf(" ", start)
    if (end < 0) end = line.length
    n = addHash(n, wordHash(line.slice(start, end)))
    start = end + 1
  }
  return n
}

function addHash(n: number, h: number): number {
  if (n === HASHES.length) {
    const bigger = new Int32Array(n * 2)
    bigger.set(HASHES)
    HASHES = bigger
  }
  HASHES[n] = h
  return n + 1
}

/** Whether any of the first `n` hashes in HASHES may be a key of the index `bits` was made from. */
function anyIn(bits: Uint32Array, n: number): boolean {
  for (let i = 0; i < n; i++) {
    const h = HASHES[i]!
    if ((bits[(h >>> 5) & (BIT_WORDS - 1)]! & (1 << (h & 31))) !== 0) return true
  }
  return false
}

/**
 * A line as compared: lower case, curly quotes straightened, punctuation dropped, whitespace
 * collapsed. "Great — ONLY ₹499!" and "great only ₹499" are the same line.
 */
export function normaliseLine(text: string): string {
  // Every turn normalises a line or two: plain ASCII takes a scan instead of three regex passes.
  const s = text.toLowerCase()
  const n = s.length
  let out = ""
  let i = 0
  while (i < n) {
    let c = s.charCodeAt(i)
    while (c < 128 && KEEP[c] === 0) {
      if (++i >= n) return out
      c = s.charCodeAt(i)
    }
    if (c >= 128) return normaliseUnicode(s)
    let j = i + 1
    for (; j < n; j++) {
      const d = s.charCodeAt(j)
      if (d >= 128) return normaliseUnicode(s)
      if (KEEP[d] === 0) break
    }
    out = out === "" ? s.slice(i, j) : `${out} ${s.slice(i, j)}`
    i = j
  }
  return out
}

function normaliseUnicode(lower: string): string {
  return lower
    .replace(/[\u2018\u2019]/g, "'")
    .replace(/[^\p{L}\p{M}\p{N}'₹$€£%]+/gu, " ")
    .trim()
}

/** Orders rules as the agent weighs them: priority, then the newer first. */
export const byPriority = (a: AgentRule, b: AgentRule): number => b.priority - a.priority || b.id - a.id

/**
 * `rules` prepared for one call. The runtime passes the same array to every call of a run until
 * its rules change, so the matching work is compiled once per array.
 */
export function prepareCallRules(rules: ReadonlyArray<AgentRule>, v: CallVars): CallRules {
  if (rules.length === 0) return NO_RULES
  return new CallRules(compile(rules), v)
}

/** Whether `text` says one of the banned lines (anywhere in it, as whole words). */
export function isBanned(text: string, rules: CallRules): boolean {
  return rules.says(text)
}

/**
 * The highest-priority rule whose trigger the callee's line meets: one of its phrases said (as
 * whole words), or the objection's category (when the caller knows it) equal to the rule's.
 */
export function ruleFor(heard: string, category: string | null, rules: CallRules): AgentRule | undefined {
  return rules.ruleFor(heard, category)
}

/** The first of `candidates` that says no banned line, or undefined when each does. */
export function firstAllowed(candidates: ReadonlyArray<string>, rules: CallRules): string | undefined {
  for (const c of candidates) if (c.trim() !== "" && !isBanned(c, rules)) return c
  return undefined
}

/** No rules at all: what a call without a knowledge base follows. */
export const NO_RULES: CallRules = new CallRules(compile([]), { name: null, agentName: "", company: "" })
