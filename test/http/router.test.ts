// Route matching on its own: statics before parameters, decoding, the /v1 prefix, 405 lists,
// and a table that contradicts itself refused at start-up.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { parseQuery } from "../../api/pipeline/validate.js"
import { json } from "../../api/reply.js"
import { type AnyRoute, type Method, route } from "../../api/route.js"
import { Router, RouteTableError } from "../../api/router.js"

const r = (method: Method, path: string): AnyRoute =>
  route({ method, path, auth: "public", summary: path, tags: [], handler: () => Effect.succeed(json(path)) })

const router = new Router([
  r("GET", "/api/workflows"),
  r("POST", "/api/workflows"),
  r("GET", "/api/workflows/{id}"),
  r("POST", "/api/workflows/preview-opening"),
  r("POST", "/api/workflows/{id}/run"),
  r("DELETE", "/dnc/{phone_e164}"),
])

const found = (method: string, path: string) => {
  const m = router.match(method, path)
  return m.kind === "found" ? { path: m.route.path, params: m.params } : m.kind
}

describe("Router", () => {
  it("matches statics before parameters at the same depth", () => {
    expect(found("POST", "/api/workflows/preview-opening")).toEqual({
      path: "/api/workflows/preview-opening",
      params: {},
    })
    expect(found("GET", "/api/workflows/preview-opening")).toEqual({
      path: "/api/workflows/{id}",
      params: { id: "preview-opening" },
    })
    expect(found("POST", "/api/workflows/12/run")).toEqual({ path: "/api/workflows/{id}/run", params: { id: "12" } })
  })

  it("decodes parameters (a + in an E.164 number arrives as %2B)", () => {
    expect(found("DELETE", "/dnc/%2B14155550100")).toEqual({
      path: "/dnc/{phone_e164}",
      params: { phone_e164: "+14155550100" },
    })
    expect(found("DELETE", "/dnc/%E0%A4")).toBe("not-found")
  })

  it("accepts the /v1 prefix, trailing and doubled slashes", () => {
    expect(found("GET", "/v1/api/workflows/3")).toEqual({ path: "/api/workflows/{id}", params: { id: "3" } })
    expect(found("GET", "/api/workflows/")).toEqual({ path: "/api/workflows", params: {} })
    expect(found("GET", "//api//workflows")).toEqual({ path: "/api/workflows", params: {} })
    expect(found("GET", "/v2/api/workflows")).toBe("not-found")
  })

  it("tells 404 from 405 and lists the allowed methods", () => {
    expect(router.match("PUT", "/api/workflows")).toEqual({
      kind: "method-not-allowed",
      allow: ["GET", "POST", "HEAD"],
    })
    expect(router.match("GET", "/api/workflows/1/run")).toEqual({ kind: "method-not-allowed", allow: ["POST"] })
    expect(router.match("GET", "/api/nothing")).toEqual({ kind: "not-found" })
    expect(router.match("HEAD", "/api/workflows").kind).toBe("found")
  })

  it("refuses duplicate routes and clashing parameter names", () => {
    expect(() => new Router([r("GET", "/a/{id}"), r("GET", "/a/{id}")])).toThrow(RouteTableError)
    expect(() => new Router([r("GET", "/a/{id}"), r("POST", "/a/{key}")])).toThrow(/clashes/)
  })
})

describe("parseQuery", () => {
  it("decodes values and gathers repeated keys", () => {
    expect(parseQuery("a=1&b=x%20y&a=2&c=")).toEqual({ a: ["1", "2"], b: "x y", c: "" })
    expect(parseQuery("")).toEqual({})
  })
})
