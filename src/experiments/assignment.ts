// Which arm of an experiment a target's calls are placed in: a seeded hash of the target, so the same
// target lands in the same arm on every attempt and in every process, with no state kept. Pure.
import { createHash } from "node:crypto"

export interface WeightedArm {
  readonly name: string
  readonly weight: number
  /** Stopped arms take no more calls: their targets are dealt again among the open arms. */
  readonly stopped: boolean
}

/** A uniform number in [0, 1) from the seed, the target and a salt: 48 bits of SHA-256. */
export function unitHash(seed: number, targetId: number, salt = ""): number {
  const digest = createHash("sha256").update(`${seed}:${targetId}${salt}`).digest()
  return digest.readUIntBE(0, 6) / 2 ** 48
}

const pick = <A extends WeightedArm>(arms: readonly A[], u: number): A => {
  const total = arms.reduce((t, a) => t + a.weight, 0)
  let r = u * total
  for (const a of arms) {
    r -= a.weight
    if (r < 0) return a
  }
  return arms.at(-1)!
}

/**
 * The arm a target belongs to, or undefined when every arm is stopped. The first draw is over every
 * arm by weight, stopped or not, so stopping one arm moves only its own targets; those are dealt
 * again, with a second hash, among the open arms by weight.
 */
export function armOf<A extends WeightedArm>(seed: number, targetId: number, arms: readonly A[]): A | undefined {
  const open = arms.filter((a) => !a.stopped)
  if (open.length === 0) return undefined
  const first = pick(arms, unitHash(seed, targetId))
  return first.stopped ? pick(open, unitHash(seed, targetId, ":reassigned")) : first
}
