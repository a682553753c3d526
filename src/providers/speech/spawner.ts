// Runs commands for a big process from a small one. Starting a child process forks the process that
// starts it, and the fork's cost grows with the parent's memory: a runtime holding hundreds of
// calls paid tens of milliseconds of its event loop for every sentence flite rendered. So a small
// helper process (a few lines of Node, started once, again if it dies) starts them instead and says
// when each has finished; only a line of JSON each way crosses the event loop.
import { type ChildProcess, spawn } from "node:child_process"
import { createInterface } from "node:readline"

/** The helper: one JSON request a line ({id, file, args, timeout}), one JSON answer a line ({id, error?}). */
const HELPER = `
const { execFile } = require("node:child_process")
const lines = require("node:readline").createInterface({ input: process.stdin })
lines.on("line", (line) => {
  let r
  try { r = JSON.parse(line) } catch { return }
  execFile(r.file, r.args, { timeout: r.timeout, maxBuffer: 1 << 20 }, (err) => {
    process.stdout.write(JSON.stringify({ id: r.id, ...(err && { error: String(err.message).slice(0, 500) }) }) + "\\n")
  })
})
process.stdin.on("end", () => process.exit(0))
`

type Refable = { ref?: () => void; unref?: () => void }

/** Whether the helper (its process and pipes) keeps this process's event loop alive. */
function hold(child: ChildProcess, on: boolean): void {
  for (const h of [child, child.stdin, child.stdout] as unknown as Refable[]) {
    if (on) h?.ref?.()
    else h?.unref?.()
  }
}

interface Pending {
  readonly resolve: () => void
  readonly reject: (e: Error) => void
}

export class Spawner {
  private child: ChildProcess | undefined
  private readonly pending = new Map<number, Pending>()
  private seq = 0

  /** Runs `file` with `args` (no shell) and resolves when it exits 0; rejects on a failure or the timeout. */
  run(file: string, args: readonly string[], timeoutMs: number): Promise<void> {
    const child = this.helper()
    const id = ++this.seq
    // Held while something waits on it (a script awaiting a render is not left to exit), else let go.
    if (this.pending.size === 0) hold(child, true)
    return new Promise<void>((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      child.stdin!.write(`${JSON.stringify({ id, file, args, timeout: timeoutMs })}\n`)
    })
  }

  private helper(): ChildProcess {
    if (this.child !== undefined && this.child.exitCode === null && !this.child.killed) return this.child
    const child = spawn(process.execPath, ["-e", HELPER], { stdio: ["pipe", "pipe", "ignore"] })
    // The helper must not keep a stopping process alive when nothing waits on it.
    hold(child, false)
    createInterface({ input: child.stdout! }).on("line", (line) => {
      let m: { id?: number; error?: string }
      try {
        m = JSON.parse(line) as typeof m
      } catch {
        return
      }
      const p = m.id === undefined ? undefined : this.pending.get(m.id)
      if (p === undefined) return
      this.pending.delete(m.id!)
      if (this.pending.size === 0) hold(child, false)
      if (m.error === undefined) p.resolve()
      else p.reject(new Error(m.error))
    })
    child.on("exit", () => {
      if (this.child === child) this.child = undefined
      for (const p of this.pending.values()) p.reject(new Error("the spawning helper exited"))
      this.pending.clear()
    })
    child.stdin!.on("error", () => undefined)
    this.child = child
    return child
  }

  stop(): void {
    this.child?.kill()
    this.child = undefined
  }
}
