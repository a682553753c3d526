// One full garbage collection once start-up is over. Loading the modules, migrating and starting
// the services grow V8's young generation to its 32 MB ceiling, and an idle process makes too
// little garbage for V8 to shrink it again; a full collection while idle does (bench/footprint).
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

/**
 * Runs one full collection. `gc` exists only in contexts made while --expose-gc is set: the flag
 * is set for the moment it takes to make one, so the program's own global never has it.
 */
export function collectGarbageOnce(): void {
  setFlagsFromString("--expose-gc")
  let gc: unknown
  try {
    gc = runInNewContext("gc")
  } finally {
    setFlagsFromString("--no-expose-gc")
  }
  if (typeof gc === "function") gc()
}

/** Schedules that collection `delayMs` after start-up, without holding the process open. */
export function collectAfterStartup(delayMs = 2_000): void {
  setTimeout(collectGarbageOnce, delayMs).unref()
}
