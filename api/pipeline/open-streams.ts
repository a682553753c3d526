// The streams the server has open (SSE, downloads), by the credential each was opened with, so
// shutdown can end them all and a signed-out session or a revoked key stops receiving at once.
import type { Invalidation, Principal } from "../../src/auth/principal.js"
import type { OpenStream } from "../http.js"

export class OpenStreams {
  private readonly all = new Set<OpenStream>()
  private readonly byCredential = new Map<string, Set<OpenStream>>()

  get size(): number {
    return this.all.size
  }

  /** Tracks `writer` until it closes, under the credentials of `principal` (if any). */
  add(writer: OpenStream, principal: Principal | undefined): void {
    this.all.add(writer)
    const credentials = principal === undefined ? [] : credentialsOf(principal)
    for (const c of credentials) this.byCredential.set(c, (this.byCredential.get(c) ?? new Set()).add(writer))
    writer.onClose(() => {
      this.all.delete(writer)
      for (const c of credentials) {
        const set = this.byCredential.get(c)
        set?.delete(writer)
        if (set?.size === 0) this.byCredential.delete(c)
      }
    })
  }

  /** The streams opened with the invalidated credential (ending them is the caller's part). */
  openWith(inv: Invalidation): OpenStream[] {
    const open = this.byCredential.get(invalidated(inv))
    return open === undefined ? [] : [...open]
  }

  endAll(): void {
    for (const s of [...this.all]) s.end()
  }
}

/** The names under which a principal's streams are found when one of its credentials is invalidated. */
export function credentialsOf(p: Principal): string[] {
  return p.kind === "api_key" ? [`key:${p.keyId}`] : [`session:${p.jti}`, `user:${p.userId}`]
}

/** The name an invalidation ends streams under. */
export function invalidated(inv: Invalidation): string {
  switch (inv.kind) {
    case "session":
      return `session:${inv.jti}`
    case "user":
      return `user:${inv.userId}`
    case "api_key":
      return `key:${inv.keyId}`
  }
}
