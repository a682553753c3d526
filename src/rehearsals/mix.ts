// Who a simulation campaign calls: `size` simulated callees drawn from a mix of the sim personas
// with a seeded generator, so the same seed, size and mix always give the same numbers and names.
import { SIM_PERSONAS, type SimPersona } from "../personas/sim-personas.js"

/** `{<sim persona id>: weight}`; weights are relative (they need not add up to 1). */
export type SimMix = Readonly<Record<string, number>>

/**
 * The mix a campaign gets when it names none: a plausible outbound consumer list, so a rehearsal
 * meets the outcomes a real run meets in about the proportions it meets them. About half the
 * calls reach nobody (no answer 25%, voicemail 15%, busy 5%, as contact rates of cold outbound
 * lists run); of the people reached, a third or so decline outright (20%), some agree (15%), and
 * the rest ask for something a human may have to approve: a discount (10%), a callback (5%) or a
 * person (5%). Those last three are what the rehearsal is for, so they are not left to chance.
 */
export const DEFAULT_SIM_MIX: SimMix = {
  "no-answer": 25,
  busy: 5,
  voicemail: 15,
  agrees: 15,
  declines: 20,
  "wants-discount": 10,
  "wants-callback": 5,
  "wants-human": 5,
}

export const SIM_PERSONA_IDS: ReadonlyArray<string> = SIM_PERSONAS.map((p) => p.id)

/** The persona ids of `mix` that are not sim personas. */
export const unknownPersonas = (mix: SimMix): string[] => Object.keys(mix).filter((id) => !SIM_PERSONA_IDS.includes(id))

/**
 * mulberry32: a small, fast 32-bit generator, good enough to deal callees and fully determined by
 * its seed (Math.random is not seedable). Returns floats in [0, 1).
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/** The largest seed (seeds are unsigned 32-bit integers). */
export const MAX_SEED = 4_294_967_295

export interface SimCallee {
  /** `+1202555` and four digits; the last digit selects the persona's behaviour on the sim carrier. */
  readonly phone: string
  readonly name: string
  readonly persona: string
}

/** The numbers' fixed part: Washington DC's 555 exchange, reserved for fiction. */
const PREFIX = "+1202555"

/**
 * Deals `size` callees from `mix` with a generator seeded by `seed`: each callee's persona by its
 * weight, then a number unique in the campaign whose last digit is one of the persona's digits.
 * Deterministic: the same seed, size and mix give the same list, in the same order.
 */
export function drawCallees(seed: number, size: number, mix: SimMix): SimCallee[] {
  const random = seededRandom(seed)
  // Fixed order (that of GET /api/sim/personas), whatever order the mix's keys came in.
  const weighted = SIM_PERSONAS.map((p) => ({ persona: p, weight: Math.max(0, mix[p.id] ?? 0) })).filter(
    (w) => w.weight > 0,
  )
  const total = weighted.reduce((sum, w) => sum + w.weight, 0)
  if (total <= 0) throw new RangeError("the mix has no persona with a positive weight")
  const pick = (): SimPersona => {
    let r = random() * total
    for (const w of weighted) {
      r -= w.weight
      if (r < 0) return w.persona
    }
    return weighted.at(-1)!.persona
  }
  const used = new Set<string>()
  const counts = new Map<string, number>()
  const callees: SimCallee[] = []
  for (let i = 0; i < size; i++) {
    const persona = pick()
    const digit = persona.digits[Math.floor(random() * persona.digits.length)]!
    // 1,000 numbers end in each digit: a campaign (at most 500 callees) always finds a free one.
    let phone: string
    do phone = `${PREFIX}${String(Math.floor(random() * 1000)).padStart(3, "0")}${digit}`
    while (used.has(phone))
    used.add(phone)
    const n = (counts.get(persona.id) ?? 0) + 1
    counts.set(persona.id, n)
    callees.push({ phone, name: `${persona.name} ${n}`, persona: persona.id })
  }
  return callees
}
