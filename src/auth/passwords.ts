// Password hashing with argon2id (OWASP parameters: 19 MiB, 2 passes, 1 lane), run on libuv's
// thread pool by @node-rs/argon2 so a login never blocks the event loop.
import { hash, verify } from "@node-rs/argon2"

// @node-rs/argon2 takes the algorithm as a const enum (Argon2id = 2) that isolated modules can't inline.
const ARGON2ID = 2
const OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const

export const hashPassword = (password: string): Promise<string> => hash(password, OPTIONS)

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    return await verify(stored, password)
  } catch {
    return false
  }
}

// Verified against when the account does not exist, so an unknown email takes as long as a wrong
// password and response times don't reveal which addresses have accounts.
let decoy: Promise<string> | undefined
export async function burnPasswordCheck(password: string): Promise<void> {
  decoy ??= hashPassword("decoy password that matches nothing")
  await verifyPassword(await decoy, password)
}
