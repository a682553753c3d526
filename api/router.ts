// Route matching: the table compiled into a segment trie, so a lookup costs one map probe per
// path segment whatever the table's size, and a path that exists under another method is a 405.
import type { AnyRoute, Method } from "./route.js"

interface Node {
  readonly statics: Map<string, Node>
  param: { readonly name: string; readonly node: Node } | undefined
  readonly routes: Map<Method, AnyRoute>
}

const newNode = (): Node => ({ statics: new Map(), param: undefined, routes: new Map() })

export type Match =
  | { readonly kind: "found"; readonly route: AnyRoute; readonly params: Record<string, string> }
  | { readonly kind: "method-not-allowed"; readonly allow: ReadonlyArray<string> }
  | { readonly kind: "not-found" }

export class RouteTableError extends Error {
  override readonly name = "RouteTableError"
}

const PARAM = /^\{([a-z_][a-z0-9_]*)\}$/i

export class Router {
  private readonly root = newNode()

  constructor(readonly routes: ReadonlyArray<AnyRoute>) {
    for (const r of routes) this.add(r)
  }

  private add(r: AnyRoute): void {
    if (!r.path.startsWith("/")) throw new RouteTableError(`route path must start with /: ${r.path}`)
    let node = this.root
    for (const seg of splitPath(r.path)) {
      const p = PARAM.exec(seg)
      if (p) {
        const name = p[1]!
        if (node.param && node.param.name !== name)
          throw new RouteTableError(
            `${r.path}: parameter {${name}} clashes with {${node.param.name}} at the same place`,
          )
        node.param ??= { name, node: newNode() }
        node = node.param.node
      } else {
        let next = node.statics.get(seg)
        if (!next) node.statics.set(seg, (next = newNode()))
        node = next
      }
    }
    if (node.routes.has(r.method)) throw new RouteTableError(`duplicate route ${r.method} ${r.path}`)
    node.routes.set(r.method, r)
  }

  /**
   * `path` is the raw request path (percent-encoded, no query). A leading /v1 is the same route.
   * Static segments win over parameters at the same depth; parameter values are decoded.
   */
  match(method: string, path: string): Match {
    const segs = splitPath(stripVersion(path))
    const lookup = (method === "HEAD" ? "GET" : method) as Method
    const hit = this.find(this.root, segs, 0, {}, lookup)
    if (hit) return { kind: "found", route: hit.node.routes.get(lookup)!, params: hit.params }
    // No route for this method: is the path served under another one (405) or not at all (404)?
    const node = this.find(this.root, segs, 0, {}, undefined)
    if (!node) return { kind: "not-found" }
    const allow: string[] = [...node.node.routes.keys()]
    if (allow.includes("GET")) allow.push("HEAD")
    return { kind: "method-not-allowed", allow }
  }

  private find(
    node: Node,
    segs: string[],
    i: number,
    params: Record<string, string>,
    method: Method | undefined,
  ): { node: Node; params: Record<string, string> } | undefined {
    if (i === segs.length)
      return (method === undefined ? node.routes.size > 0 : node.routes.has(method)) ? { node, params } : undefined
    const seg = segs[i]!
    const s = node.statics.get(seg)
    if (s) {
      const hit = this.find(s, segs, i + 1, params, method)
      if (hit) return hit
    }
    if (node.param) {
      const value = decodeSegment(seg)
      if (value === undefined) return undefined
      const hit = this.find(node.param.node, segs, i + 1, { ...params, [node.param.name]: value }, method)
      if (hit) return hit
    }
    return undefined
  }
}

function stripVersion(path: string): string {
  if (path === "/v1") return "/"
  return path.startsWith("/v1/") ? path.slice(3) : path
}

/** `/a/b/` and `/a//b` both give ["a", "b"]: a trailing or doubled slash is the same resource. */
function splitPath(path: string): string[] {
  return path.split("/").filter((s) => s.length > 0)
}

function decodeSegment(seg: string): string | undefined {
  try {
    return decodeURIComponent(seg)
  } catch {
    return undefined
  }
}
