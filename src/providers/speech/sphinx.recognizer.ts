// Speech recognition offline: CMU PocketSphinx (Debian's libpocketsphinx3 and pocketsphinx-en-us),
// called in-process through koffi. A decoder hears an utterance frame by frame as it comes (each
// 20 ms frame costs well under a millisecond, so no turn of the event loop holds a whole
// utterance's decoding), gives partial hypotheses on the way and the final one at the end. It
// listens for a phrase list (a JSGF grammar of what the callee may say, as the simulator's callee
// lines are known), which recognises phone audio far better than the general language model.
// The en-us acoustic model is 16 kHz: phone audio (8 kHz) is doubled by interpolation before it.
import { createHash } from "node:crypto"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { decode, FRAME_SAMPLES } from "../audio/g711.js"
import type { StreamingRecognizer } from "./streaming.interface.js"

const MODEL = "/usr/share/pocketsphinx/model/en-us"
const LIBRARY = "libpocketsphinx.so.3"

interface SphinxApi {
  ps_args(): unknown
  cmd_ln_parse_r(inout: null, defn: unknown, argc: number, argv: string[], strict: number): unknown
  ps_init(config: unknown): unknown
  /** ps_init on a worker thread (loading the model takes ~0.2 s: never on the event loop of a process with calls). */
  ps_init_async(config: unknown, done: (err: unknown, ps: unknown) => void): void
  ps_free(ps: unknown): number
  ps_lookup_word(ps: unknown, word: string): string | null
  ps_set_jsgf_string(ps: unknown, name: string, jsgf: string): number
  /** ps_set_jsgf_string on a worker thread (compiling a phrase list takes ~5-10 ms). */
  ps_set_jsgf_string_async(ps: unknown, name: string, jsgf: string, done: (err: unknown, rc: number) => void): void
  ps_set_search(ps: unknown, name: string): number
  ps_start_utt(ps: unknown): number
  ps_process_raw(ps: unknown, data: Int16Array, n: number, noSearch: number, fullUtt: number): number
  ps_end_utt(ps: unknown): number
  ps_process_raw_async(ps: unknown, data: Int16Array, n: number, done: (err: unknown) => void): void
  ps_end_utt_async(ps: unknown, done: (err: unknown) => void): void
  ps_get_hyp(ps: unknown, score: null): string | null
}

let api: SphinxApi | undefined | null

/** The library's functions, or null when the engine is not installed here. */
function sphinx(): SphinxApi | null {
  if (api !== undefined) return api
  if (!existsSync(`${MODEL}/en-us/mdef`)) return (api = null)
  try {
    const koffi = createRequire(import.meta.url)("koffi") as {
      load(path: string): {
        func(signature: string): ((...args: unknown[]) => unknown) & { async(...args: unknown[]): void }
      }
    }
    // Logging off once, for the process (libsphinxbase keeps one global log file: a decoder told
    // -logfn reopens it, which raced decoders on worker threads into a corrupted heap).
    koffi.load("libsphinxbase.so.3").func("void err_set_logfp(void *stream)")(null)
    const lib = koffi.load(LIBRARY)
    const f = (sig: string) => lib.func(sig)
    // Each function bound once (binding parses its prototype: never per call).
    const init = f("void *ps_init(void *config)")
    const processRaw = f("int ps_process_raw(void *ps, const int16_t *data, size_t n, int no_search, int full_utt)")
    const endUtt = f("int ps_end_utt(void *ps)")
    const setJsgf = f("int ps_set_jsgf_string(void *ps, const char *name, const char *jsgf)")
    api = {
      ps_args: f("void *ps_args()"),
      cmd_ln_parse_r: f("void *cmd_ln_parse_r(void *inout, void *defn, int argc, const char **argv, int strict)"),
      ps_init: init,
      ps_init_async: (config: unknown, done: (err: unknown, ps: unknown) => void) => init.async(config, done),
      ps_free: f("int ps_free(void *ps)"),
      ps_lookup_word: f("const char *ps_lookup_word(void *ps, const char *word)"),
      ps_set_jsgf_string: setJsgf,
      ps_set_jsgf_string_async: (ps: unknown, name: string, jsgf: string, done: (err: unknown, rc: number) => void) =>
        setJsgf.async(ps, name, jsgf, done),
      ps_set_search: f("int ps_set_search(void *ps, const char *name)"),
      ps_start_utt: f("int ps_start_utt(void *ps)"),
      ps_process_raw: processRaw,
      ps_end_utt: endUtt,
      ps_process_raw_async: (ps: unknown, data: Int16Array, n: number, done: (err: unknown) => void) =>
        processRaw.async(ps, data, n, 0, 0, done),
      ps_end_utt_async: (ps: unknown, done: (err: unknown) => void) => endUtt.async(ps, done),
      ps_get_hyp: f("const char *ps_get_hyp(void *ps, void *score)"),
    } as unknown as SphinxApi
  } catch {
    api = null
  }
  return api
}

/** Whether PocketSphinx and its English model are installed (apt-get install pocketsphinx pocketsphinx-en-us). */
export const sphinxAvailable = (): boolean => sphinx() !== null

/** Words as the dictionary spells them: lower case, letters and apostrophes. */
export const wordsOf = (line: string): string[] =>
  line
    .toLowerCase()
    .replace(/[^a-z' ]+/g, " ")
    .split(" ")
    .filter((w) => w !== "" && w !== "'")

/** The decoder being loaded (loads run one after another). */
let loading: Promise<void> = Promise.resolve()

function installed(): SphinxApi {
  const s = sphinx()
  if (s === null) throw new Error("PocketSphinx is not installed (apt-get install pocketsphinx pocketsphinx-en-us)")
  return s
}

/**
 * The decoder's settings. `general`: with the general language model as its search (a decoder
 * given no search crashes the library on its first frame, so one without must be given a phrase
 * list at once: listenFor).
 */
function config(s: SphinxApi, general: boolean): unknown {
  const argv = ["-hmm", `${MODEL}/en-us`, "-dict", `${MODEL}/cmudict-en-us.dict`]
  if (general) argv.push("-lm", `${MODEL}/en-us.lm.bin`)
  return s.cmd_ln_parse_r(null, s.ps_args(), argv.length, argv, 1)
}

/** One decoder: an utterance at a time, fed 20 ms μ-law frames. */
export class SphinxDecoder {
  private readonly grammars = new Set<string>()
  private inUtterance = false
  private freed = false
  private readonly wide = new Int16Array(FRAME_SAMPLES * 2)
  private readonly pcm = new Int16Array(FRAME_SAMPLES)

  private constructor(
    private readonly s: SphinxApi,
    private readonly ps: unknown,
  ) {}

  /**
   * A decoder (about 0.2 s to load its model, on this thread; 0.4 s with the general language
   * model); throws when the engine is not installed.
   */
  static create(general = true): SphinxDecoder {
    const s = installed()
    const ps = s.ps_init(config(s, general))
    if (ps === null) throw new Error("PocketSphinx did not start")
    return new SphinxDecoder(s, ps)
  }

  /** A decoder whose model loads on a worker thread. */
  static load(general: boolean): Promise<SphinxDecoder> {
    // One at a time: the library's start-up touches state its decoders share.
    const loaded = loading.then(async () => {
      const s = installed()
      const cfg = config(s, general)
      const ps = await new Promise<unknown>((resolve, reject) =>
        s.ps_init_async(cfg, (err, ps) => (err ? reject(err) : resolve(ps))),
      )
      if (ps === null) throw new Error("PocketSphinx did not start")
      return new SphinxDecoder(s, ps)
    })
    loading = loaded.then(
      () => undefined,
      () => undefined,
    )
    return loaded
  }

  /**
   * Listens for these phrases from the next utterance on; a phrase with a word the dictionary does
   * not know is left out (it could not be recognised). Returns the phrases kept.
   */
  listenFor(phrases: readonly string[]): string[] {
    const { unique, name, jsgf } = this.grammarOf(phrases)
    if (jsgf !== undefined) {
      if (this.s.ps_set_jsgf_string(this.ps, name, jsgf) !== 0) throw new Error("the phrase list was refused")
      this.grammars.add(name)
    }
    if (this.s.ps_set_search(this.ps, name) !== 0) throw new Error("the phrase list could not be chosen")
    return unique
  }

  /** listenFor, the phrase list compiled on a worker thread (a decoder loading in a process with calls). */
  async listenForOffThread(phrases: readonly string[]): Promise<string[]> {
    const { unique, name, jsgf } = this.grammarOf(phrases)
    if (jsgf !== undefined) {
      const rc = await new Promise<number>((resolve, reject) =>
        this.s.ps_set_jsgf_string_async(this.ps, name, jsgf, (err, r) => (err ? reject(err) : resolve(r))),
      )
      if (rc !== 0) throw new Error("the phrase list was refused")
      this.grammars.add(name)
    }
    if (this.s.ps_set_search(this.ps, name) !== 0) throw new Error("the phrase list could not be chosen")
    return unique
  }

  /** The phrases that can be recognised, their grammar's name, and its text when not yet compiled. */
  private grammarOf(phrases: readonly string[]): { unique: string[]; name: string; jsgf: string | undefined } {
    const kept = phrases
      .map((p) => wordsOf(p))
      .filter((ws) => ws.length > 0 && ws.every((w) => this.s.ps_lookup_word(this.ps, w) !== null))
      .map((ws) => ws.join(" "))
    const unique = [...new Set(kept)]
    if (unique.length === 0) throw new Error("no phrase of the list can be recognised")
    const name = `g${createHash("sha1").update(unique.join("\n")).digest("hex").slice(0, 16)}`
    const jsgf = this.grammars.has(name)
      ? undefined
      : `#JSGF V1.0;\ngrammar ${name};\npublic <line> = ${unique.join(" | ")};\n`
    return { unique, name, jsgf }
  }

  /** Hears one 20 ms frame of μ-law audio (an utterance starts with its first frame). */
  frame(mulaw: Uint8Array): void {
    if (this.freed) throw new Error("PocketSphinx decoder used after free")
    if (mulaw.length !== FRAME_SAMPLES) throw new RangeError(`a frame is ${FRAME_SAMPLES} bytes`)
    if (!this.inUtterance) {
      this.s.ps_start_utt(this.ps)
      this.inUtterance = true
    }
    const pcm = decode(mulaw, this.pcm)
    for (let i = 0; i < pcm.length; i++) {
      this.wide[2 * i] = pcm[i]!
      this.wide[2 * i + 1] = (pcm[i]! + (pcm[i + 1] ?? pcm[i]!)) >> 1
    }
    this.s.ps_process_raw(this.ps, this.wide, this.wide.length, 0, 0)
  }

  /**
   * Hears frames on a worker thread (the general model costs about a third of real time: never on
   * the event loop). One call at a time per decoder: the caller awaits each before the next.
   */
  async framesOffThread(frames: readonly Uint8Array[]): Promise<void> {
    if (this.freed) throw new Error("PocketSphinx decoder used after free")
    if (!this.inUtterance) {
      this.s.ps_start_utt(this.ps)
      this.inUtterance = true
    }
    const wide = new Int16Array(frames.length * FRAME_SAMPLES * 2)
    for (const [k, f] of frames.entries()) {
      const pcm = decode(f, this.pcm)
      const o = k * FRAME_SAMPLES * 2
      for (let i = 0; i < pcm.length; i++) {
        wide[o + 2 * i] = pcm[i]!
        wide[o + 2 * i + 1] = (pcm[i]! + (pcm[i + 1] ?? pcm[i]!)) >> 1
      }
    }
    await new Promise<void>((resolve, reject) =>
      this.s.ps_process_raw_async(this.ps, wide, wide.length, (err) => (err ? reject(err) : resolve())),
    )
  }

  /** end() with the final search on a worker thread. */
  async endOffThread(): Promise<string> {
    if (!this.inUtterance) return ""
    this.inUtterance = false
    await new Promise<void>((resolve, reject) =>
      this.s.ps_end_utt_async(this.ps, (err) => (err ? reject(err) : resolve())),
    )
    return this.s.ps_get_hyp(this.ps, null) ?? ""
  }

  /** What it has heard so far in this utterance ("" for nothing yet). */
  partial(): string {
    return this.inUtterance ? (this.s.ps_get_hyp(this.ps, null) ?? "") : ""
  }

  /** Ends the utterance: what was said ("" when nothing matched). */
  end(): string {
    if (!this.inUtterance) return ""
    this.s.ps_end_utt(this.ps)
    this.inUtterance = false
    return this.s.ps_get_hyp(this.ps, null) ?? ""
  }

  free(): void {
    if (this.freed) return
    this.freed = true
    this.s.ps_free(this.ps)
  }
}

/** Decoders kept idle for the next utterance (each holds its own model, ~29 MB), beyond which one is freed. */
const MAX_IDLE = 32
/** Idle decoders below which more are loaded ahead. */
const RESERVE = 4
/**
 * Decoders a pool holds at most (~29 MB each: ~1.9 GB): as many callees as can speak at once in
 * one process; past it, an utterance's frames wait (30 s at most) for a decoder to come back.
 */
const MAX_DECODERS = 64
/** The longest utterance kept while it waits for a decoder (30 s of frames). */
const MAX_WAITING_FRAMES = 1500

/**
 * The decoders of a process, lent to calls an utterance at a time: a call holds one only while its
 * callee speaks, so a process of many calls needs as many decoders as callees speaking at once.
 * A decoder loads on a worker thread; frames that come before it are kept (up to 30 s) and fed when it is ready.
 */
export class SphinxPool {
  private readonly idle: SphinxDecoder[] = []
  /** Decoders that exist (idle, lent or loading): at most MAX_DECODERS; who waits for one past that. */
  private count = 0
  private ahead = 0
  private readonly waiting: Array<(d: SphinxDecoder) => void> = []

  /**
   * `phrases`: what every decoder of the pool listens for (null: the general English model); `max`:
   * the most decoders it holds (MAX_DECODERS).
   */
  constructor(
    private readonly phrases: readonly string[] | null,
    private readonly max = MAX_DECODERS,
    /**
     * Speech every new decoder hears once before its first call: a fresh decoder's normalisation
     * starts from the model's defaults, not 8 kHz phone audio, and it misses its first utterance.
     */
    private readonly calibration?: () => Promise<readonly Uint8Array[]>,
  ) {}

  /** Loads `n` decoders ahead of the first calls. */
  async warm(n: number): Promise<void> {
    const more = Math.max(0, Math.min(n - this.idle.length, this.max - this.count))
    const loaded = await Promise.all(Array.from({ length: more }, () => this.load()))
    for (const d of loaded) this.release(d)
  }

  /**
   * An idle decoder at once, else one loaded for the caller, else (MAX_DECODERS exist: each holds
   * its own model) the next one released. A reserve is kept: when the idle ones run low, more are
   * loaded ahead, since loads run one at a time and a burst of callees would wait in line.
   */
  take(): SphinxDecoder | Promise<SphinxDecoder> {
    const d = this.idle.pop()
    while (this.idle.length + this.ahead < RESERVE && this.count < this.max) {
      this.ahead++
      void this.load()
        .then(
          (x) => this.release(x),
          () => undefined,
        )
        .finally(() => this.ahead--)
    }
    if (d !== undefined) return d
    if (this.count < this.max) return this.load()
    return new Promise((resolve) => this.waiting.push(resolve))
  }

  private async load(): Promise<SphinxDecoder> {
    this.count++
    try {
      const d = await SphinxDecoder.load(this.phrases === null)
      if (this.phrases !== null) await d.listenForOffThread(this.phrases)
      if (this.calibration !== undefined) {
        await d.framesOffThread(await this.calibration())
        await d.endOffThread()
      }
      return d
    } catch (err) {
      this.count--
      throw err
    }
  }

  /** A decoder whose state is not known (a failed decode): freed, its place given to whoever waits. */
  discard(d: SphinxDecoder): void {
    this.count--
    d.free()
    const next = this.waiting.shift()
    if (next !== undefined)
      this.load().then(next, () => {
        this.waiting.unshift(next)
      })
  }

  release(d: SphinxDecoder): void {
    const next = this.waiting.shift()
    if (next !== undefined) return next(d)
    if (this.idle.length < MAX_IDLE) this.idle.push(d)
    else {
      this.count--
      d.free()
    }
  }

  /**
   * A call's recogniser. It decodes on worker threads (a phrase list costs ~2% of real time, the
   * general model about a third: a process of many calls cannot spend that on its event loop).
   */
  recognizer(): StreamingRecognizer {
    return new PooledRecognizer(this, true)
  }

  /** Decoders idle, and in all (idle, lent, loading). */
  get idleDecoders(): number {
    return this.idle.length
  }

  get decoders(): number {
    return this.count
  }

  close(): void {
    for (const d of this.idle.splice(0)) {
      this.count--
      d.free()
    }
  }
}

class PooledRecognizer implements StreamingRecognizer {
  private decoder: SphinxDecoder | undefined
  private pending: Promise<SphinxDecoder> | undefined
  private held: Uint8Array[] = []
  private freed = false
  /** Off the event loop: frames waiting for the worker thread, and the batch it is decoding. */
  private queue: Uint8Array[] = []
  private pumping: Promise<void> | undefined

  constructor(
    private readonly pool: SphinxPool,
    private readonly offThread: boolean,
  ) {}

  frame(mulaw: Uint8Array): void {
    if (this.freed) return
    if (this.decoder !== undefined) return this.hear(this.decoder, [mulaw])
    if (this.held.length < MAX_WAITING_FRAMES) this.held.push(mulaw.slice())
    if (this.pending !== undefined) return
    const got = this.pool.take()
    if (got instanceof SphinxDecoder) this.ready(got)
    else
      this.pending = got.then((d) => {
        this.pending = undefined
        if (this.freed) this.pool.release(d)
        else this.ready(d)
        return d
      })
  }

  private ready(d: SphinxDecoder): void {
    this.decoder = d
    this.hear(d, this.held)
    this.held = []
  }

  private hear(d: SphinxDecoder, frames: readonly Uint8Array[]): void {
    if (!this.offThread) {
      for (const f of frames) d.frame(f)
      return
    }
    for (const f of frames) if (this.queue.length < MAX_WAITING_FRAMES) this.queue.push(f.slice())
    this.pumping ??= this.pump(d).finally(() => {
      this.pumping = undefined
    })
  }

  /** Decodes what is queued, a batch at a time, on a worker thread. */
  private async pump(d: SphinxDecoder): Promise<void> {
    try {
      while (this.queue.length > 0) await d.framesOffThread(this.queue.splice(0))
    } catch {
      this.queue = [] // the utterance is lost; end() answers what was decoded
    }
  }

  partial(): string {
    return this.decoder?.partial() ?? ""
  }

  async end(): Promise<string> {
    if (this.pending !== undefined) await this.pending.catch(() => undefined)
    const d = this.decoder
    this.decoder = undefined
    this.held = []
    if (d === undefined) return ""
    try {
      if (!this.offThread) return d.end()
      // Frames queued as the last batch finished found the pump still set and started none: decode
      // them too (an utterance missing its last words matches no phrase of the list).
      for (;;) {
        if (this.pumping !== undefined) await this.pumping
        else if (this.queue.length > 0) await this.pump(d)
        else break
      }
      return await d.endOffThread()
    } finally {
      this.pool.release(d)
    }
  }

  free(): void {
    this.freed = true
    this.held = []
    this.queue = []
    const d = this.decoder
    this.decoder = undefined
    if (d === undefined) return
    // A decoder still decoding on a worker thread goes back once it is done.
    void (this.pumping ?? Promise.resolve())
      .then(() => d.endOffThread())
      .then(
        () => this.pool.release(d),
        () => this.pool.discard(d),
      )
  }
}
