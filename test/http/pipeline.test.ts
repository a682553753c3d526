// The request pipeline's steps on their own (api/pipeline/): plain inputs in, a value or the
// DomainError to answer with out; the server's composition of them is tested through HTTP elsewhere.
import { Cause, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { z } from "zod"
import { DATABASE_TIMEOUT, INTERNAL_ERROR } from "../../api/error-map.js"
import { authenticate, authRequirement, LookupFailed } from "../../api/pipeline/authenticate.js"
import { type BodyPlan, bodyLimit } from "../../api/pipeline/body-limit.js"
import { clientAddress } from "../../api/pipeline/client-address.js"
import { outcome, requestContext } from "../../api/pipeline/dispatch.js"
import type { Incoming } from "../../api/pipeline/incoming.js"
import { requestLine } from "../../api/pipeline/log-request.js"
import { negotiate } from "../../api/pipeline/negotiate.js"
import { credentialsOf, invalidated } from "../../api/pipeline/open-streams.js"
import { requestId } from "../../api/pipeline/request-id.js"
import { commonHeaders, defectError } from "../../api/pipeline/respond.js"
import { systemKey } from "../../api/pipeline/system-key.js"
import { validateBody, validateInput } from "../../api/pipeline/validate.js"
import { json } from "../../api/reply.js"
import { type AnyRoute, route } from "../../api/route.js"
import type { Principal } from "../../src/auth/principal.js"
import {
  BadRequestBody,
  NotFound,
  PayloadTooLarge,
  Unauthenticated,
  UnsupportedMediaType,
  ValidationFailed,
} from "../../src/platform/errors.js"

const handler = () => Effect.succeed(json({}))
const limits = { bodyLimitBytes: 1000, uploadLimitBytes: 50_000 }
const doc = { summary: "", tags: [], handler }
const jsonRoute = route({
  method: "POST",
  path: "/x",
  auth: "public",
  body: { json: z.object({ a: z.number() }) },
  ...doc,
})
const uploadRoute = route({
  method: "POST",
  path: "/u",
  auth: "jwt",
  body: { json: z.unknown(), multipart: "stream" },
  ...doc,
})
const partsRoute = route({ method: "POST", path: "/p", auth: "jwt-only", body: { multipart: true }, ...doc })
const user: Principal = {
  kind: "user",
  userId: 7,
  tenantId: 1,
  role: "owner",
  email: "a@b.c",
  jti: "j1",
  expiresAt: 0,
  via: "bearer",
}

const incoming = (over: Partial<Incoming> = {}): Incoming => ({
  method: "POST",
  url: "/x",
  query: "",
  headers: {},
  remoteAddress: "127.0.0.1",
  clientIp: "127.0.0.1",
  requestId: "r1",
  ...over,
})

describe("requestId", () => {
  it("keeps a plain token the caller sent", () => {
    expect(requestId("abc-1.2:3_x")).toBe("abc-1.2:3_x")
  })
  it("replaces a missing, too long or odd one with a fresh UUID", () => {
    const uuid = /^[0-9a-f-]{36}$/
    expect(requestId(undefined)).toMatch(uuid)
    expect(requestId("a".repeat(129))).toMatch(uuid)
    expect(requestId("has space")).toMatch(uuid)
    expect(requestId("")).toMatch(uuid)
    expect(requestId(undefined)).not.toBe(requestId(undefined))
  })
})

describe("clientAddress", () => {
  it("is the peer unless the peer is a trusted proxy", () => {
    expect(clientAddress("::ffff:10.0.0.9", "1.2.3.4", [])).toEqual({ remoteAddress: "10.0.0.9", clientIp: "10.0.0.9" })
    expect(clientAddress("10.0.0.9", "1.2.3.4, 10.0.0.8", ["10.0.0.9", "10.0.0.8"])).toEqual({
      remoteAddress: "10.0.0.9",
      clientIp: "1.2.3.4",
    })
  })
})

describe("bodyLimit", () => {
  const plan = (r: AnyRoute | undefined, headers: Record<string, string>) => bodyLimit(r, headers, limits) as BodyPlan
  it("gives the upload limit only to a multipart body on a multipart route", () => {
    const multipart = { "content-type": "multipart/form-data; boundary=x", "content-length": "10" }
    const upload = { limit: 50_000, hasBody: true, streamed: true, isMultipart: true }
    expect(plan(uploadRoute, multipart)).toMatchObject(upload)
    expect(plan(uploadRoute, { "content-type": "application/json", "content-length": "10" })).toMatchObject({
      limit: 1000,
      streamed: false,
    })
    expect(plan(jsonRoute, multipart)).toMatchObject({ limit: 1000, streamed: false })
    expect(plan(undefined, multipart)).toMatchObject({ limit: 1000, streamed: false })
    expect(plan(partsRoute, multipart)).toMatchObject({ limit: 50_000, streamed: false })
  })
  it("refuses a declared length over the limit before anything is read", () => {
    const refused = bodyLimit(jsonRoute, { "content-length": "1001" }, limits)
    expect(refused).toBeInstanceOf(PayloadTooLarge)
    expect((refused as PayloadTooLarge).limitBytes).toBe(1000)
    expect(bodyLimit(jsonRoute, { "content-length": "1000" }, limits)).not.toBeInstanceOf(PayloadTooLarge)
  })
  it("sees a body in a positive length or a transfer encoding", () => {
    expect(plan(jsonRoute, {}).hasBody).toBe(false)
    expect(plan(jsonRoute, { "content-length": "0" })).toMatchObject({ hasBody: false, declared: 0 })
    expect(plan(jsonRoute, { "transfer-encoding": "chunked" })).toMatchObject({ hasBody: true, declared: undefined })
  })
})

describe("authenticate", () => {
  it("asks a user or a key of the route's scope, by method unless the route names one", () => {
    expect(authRequirement(jsonRoute, "POST")).toBeUndefined()
    expect(authRequirement(uploadRoute, "POST")).toEqual({ level: "jwt", permission: "write" })
    expect(authRequirement({ ...uploadRoute, method: "GET" }, "HEAD")).toEqual({ level: "jwt", permission: "read" })
    expect(authRequirement({ ...uploadRoute, permission: "admin" }, "GET")).toEqual({
      level: "jwt",
      permission: "admin",
    })
    expect(authRequirement(partsRoute, "POST")).toEqual({ level: "jwt-only", permission: "write" })
  })
  it("releases the held body before a synchronous answer is handed on", () => {
    const events: string[] = []
    const caller = authenticate(
      () => (events.push("check"), user),
      () => events.push("release"),
    )
    expect(caller).toBe(user)
    expect(events).toEqual(["check", "release"])
    const refused = new Unauthenticated({ message: "no" })
    expect(
      authenticate(
        () => refused,
        () => {},
      ),
    ).toBe(refused)
  })
  it("releases once an asynchronous check settles", async () => {
    let released = 0
    const pending = authenticate(
      () => Promise.resolve(user),
      () => released++,
    )
    expect(pending).toBeInstanceOf(Promise)
    expect(released).toBe(0)
    expect(await pending).toBe(user)
    expect(released).toBe(1)
  })
  it("turns a check that throws or rejects into a lookup failure, and still releases", async () => {
    let released = 0
    const thrown = authenticate(
      () => {
        throw new Error("db down")
      },
      () => released++,
    )
    expect(thrown).toBeInstanceOf(LookupFailed)
    const rejected = await authenticate(
      () => Promise.reject(new Error("late")),
      () => released++,
    )
    expect(rejected).toBeInstanceOf(LookupFailed)
    expect((rejected as LookupFailed).cause).toEqual(new Error("late"))
    expect(released).toBe(2)
  })
})

describe("systemKey", () => {
  const req = (headers: Record<string, string>) => ({ method: "POST", url: "/internal", headers })
  it("hides system routes (404) in a deployment without a key", () => {
    expect(systemKey(undefined)(req({ "x-system-key": "k" }))).toBeInstanceOf(NotFound)
  })
  it("refuses a missing or wrong key", () => {
    const check = systemKey("secret")
    expect(check(req({}))).toBeInstanceOf(Unauthenticated)
    expect(check(req({ "x-system-key": "secreT" }))).toBeInstanceOf(Unauthenticated)
  })
  it("accepts the key, with an optional positive tenant id", () => {
    const check = systemKey("secret")
    expect(check(req({ "x-system-key": "secret" }))).toBeUndefined()
    expect(check(req({ "x-system-key": "secret", "x-tenant-id": "42" }))).toBe(42)
    const bad = check(req({ "x-system-key": "secret", "x-tenant-id": "0" }))
    expect(bad).toBeInstanceOf(ValidationFailed)
    expect((bad as ValidationFailed).errors).toEqual([{ field: "X-Tenant-Id", message: "must be a positive integer" }])
  })
})

describe("negotiate", () => {
  const spec = jsonRoute.body
  it("parses JSON of any JSON media type, and an empty untyped body as none", () => {
    const patch = "Application/Merge-Patch+JSON; charset=utf-8"
    expect(negotiate(spec, "application/json", Buffer.from('{"a":1}'), false)).toEqual({
      kind: "json",
      value: { a: 1 },
    })
    expect(negotiate(spec, patch, Buffer.from("2"), false)).toEqual({ kind: "json", value: 2 })
    expect(negotiate(spec, undefined, Buffer.alloc(0), false)).toEqual({ kind: "json", value: undefined })
  })
  it("answers BAD_JSON for a body that does not parse", () => {
    const bad = negotiate(spec, "application/json", Buffer.from("{nope"), false)
    expect(bad).toBeInstanceOf(BadRequestBody)
    expect((bad as BadRequestBody).code).toBe("BAD_JSON")
  })
  it("answers 415 for a type the route does not take, naming what it does", () => {
    const bad = negotiate(spec, "text/plain", Buffer.from("hi"), false)
    expect(bad).toBeInstanceOf(UnsupportedMediaType)
    const message = 'content type "text/plain" is not accepted; send application/json'
    expect((bad as UnsupportedMediaType).message).toBe(message)
    const none = negotiate(partsRoute.body, undefined, Buffer.from("x"), false) as UnsupportedMediaType
    expect(none.message).toBe("content type (none) is not accepted; send multipart/form-data")
  })
  it("splits multipart parts, and answers BAD_MULTIPART for a form it cannot split", () => {
    const type = "multipart/form-data; boundary=XyZ"
    const form =
      '--XyZ\r\nContent-Disposition: form-data; name="f"; filename="a.csv"\r\n' +
      "Content-Type: text/csv\r\n\r\nphone\n1\r\n--XyZ--\r\n"
    const parts = negotiate(partsRoute.body, type, Buffer.from(form), false)
    expect(parts).toMatchObject({ kind: "parts", parts: [{ name: "f", filename: "a.csv", type: "text/csv" }] })
    expect((parts as { parts: Array<{ data: Buffer }> }).parts[0]!.data.toString()).toBe("phone\n1")
    const bad = negotiate(partsRoute.body, "multipart/form-data", Buffer.from("junk"), false)
    expect((bad as BadRequestBody).code).toBe("BAD_MULTIPART")
  })
  it("leaves raw bodies, streamed uploads and body-less routes alone", () => {
    expect(negotiate({ raw: true }, "text/plain", Buffer.from("x"), false)).toEqual({ kind: "none" })
    const streamed = negotiate(uploadRoute.body, "multipart/form-data; boundary=x", Buffer.alloc(0), true)
    expect(streamed).toEqual({ kind: "none" })
    expect(negotiate(undefined, "text/plain", Buffer.from("x"), false)).toEqual({ kind: "none" })
  })
})

describe("validate", () => {
  const listRoute = route({
    method: "GET",
    path: "/w/{id}",
    auth: "public",
    summary: "",
    tags: [],
    params: z.object({ id: z.coerce.number().int().positive() }),
    query: z.object({ limit: z.coerce.number().max(10).optional(), tag: z.array(z.string()).optional() }),
    handler,
  })
  it("checks params, then query (a repeated key is an array)", () => {
    expect(validateInput(listRoute, { id: "3" }, "limit=5&tag=a&tag=b")).toEqual({
      params: { id: 3 },
      query: { limit: 5, tag: ["a", "b"] },
    })
    const params = validateInput(listRoute, { id: "x" }, "limit=50") as ValidationFailed
    expect(params).toBeInstanceOf(ValidationFailed)
    expect(params.errors.map((e) => e.field)).toEqual(["id"])
    const query = validateInput(listRoute, { id: "1" }, "limit=50") as ValidationFailed
    expect(query.errors.map((e) => e.field)).toEqual(["limit"])
    expect(query.message).toMatch(/^invalid query: limit: /)
    expect(query.status).toBe(422)
  })
  it("gives the body's failure the contract's shape and the route's status", () => {
    const strict = { ...jsonRoute, validationStatus: 400 as const }
    const failed = validateBody(strict, { kind: "json", value: { a: "x", b: 1 } }) as ValidationFailed
    expect(failed).toBeInstanceOf(ValidationFailed)
    expect(failed.status).toBe(400)
    expect(failed.errors).toEqual([{ field: "a", message: expect.any(String) }])
    expect(failed.message).toMatch(/^invalid request body: a: /)
    const empty = validateBody(jsonRoute, { kind: "json", value: undefined }) as ValidationFailed
    expect(empty.errors[0]!.field).toBe("body")
    expect(validateBody(jsonRoute, { kind: "json", value: { a: 1 } })).toEqual({ a: 1 })
    expect(validateBody(partsRoute, { kind: "parts", parts: [] })).toBeUndefined()
  })
})

describe("dispatch", () => {
  const taken = { rawParams: {}, raw: Buffer.from('{"a":1}'), upload: undefined, principal: user, onAbort: () => {} }
  it("builds the handler's context, HEAD read as GET", () => {
    const inc = incoming({ headers: { "content-type": "application/json" }, method: "HEAD", query: "q=1" })
    const ctx = requestContext(inc, jsonRoute, taken, systemKey(undefined))
    expect(ctx).toMatchObject({ method: "GET", body: { a: 1 }, rawQuery: "q=1", principal: user })
    expect((ctx as { systemTenantId: unknown }).systemTenantId).toBeUndefined()
  })
  it("checks the system key before anything else", () => {
    const system = { ...jsonRoute, auth: "system" as const }
    const inc = incoming({ headers: { "x-system-key": "k", "x-tenant-id": "9", "content-type": "application/json" } })
    expect(requestContext(inc, system, taken, systemKey("k"))).toMatchObject({ systemTenantId: 9 })
    const bad = incoming({ headers: { "content-type": "text/plain" } })
    expect(requestContext(bad, system, taken, systemKey("k"))).toBeInstanceOf(Unauthenticated)
  })
  it("reads the handler's exit as one outcome", () => {
    const failure = new NotFound({ message: "gone" })
    expect(outcome(Exit.succeed(json({ ok: 1 })), false)).toMatchObject({ kind: "reply", reply: { kind: "json" } })
    expect(outcome(Exit.fail(failure), false)).toEqual({ kind: "failed", error: failure })
    expect(outcome(Exit.failCause(Cause.interrupt(Cause.empty as never)), true).kind).toBe("aborted")
    const died = outcome(Exit.die(new Error("boom")), false)
    expect(died).toMatchObject({ kind: "defect", cause: new Error("boom") })
  })
})

describe("respond and logRequest", () => {
  it("tags every reply with the request id, and closes connections while draining", () => {
    expect(commonHeaders("r1", false)).toEqual({ "X-Request-Id": "r1" })
    expect(commonHeaders("r1", true)).toEqual({ "X-Request-Id": "r1", Connection: "close" })
  })
  it("answers a cancelled statement with 503 and any other defect with 500", () => {
    expect(defectError({ code: "57014" })).toBe(DATABASE_TIMEOUT)
    expect(defectError(new Error("bug"))).toBe(INTERNAL_ERROR)
  })
  it("logs 499 for a client that left before any reply", () => {
    const inc = incoming()
    expect(requestLine({ aborted: true, started: false, status: 0, bytesOut: 0, bytesIn: 0 }, inc, 1.234)).toEqual({
      req_id: "r1",
      method: "POST",
      path: "/x",
      status: 499,
      ms: 1.23,
      bytes_out: 0,
      aborted: true,
    })
    const served = requestLine({ aborted: false, started: true, status: 201, bytesOut: 12, bytesIn: 40 }, inc, 2)
    expect(served).not.toHaveProperty("aborted")
    expect(served.bytes_in).toBe(40)
  })
  it("files a stream under each credential that can end it", () => {
    expect(credentialsOf(user)).toEqual(["session:j1", "user:7"])
    expect(credentialsOf({ kind: "api_key", keyId: 3, tenantId: 1, scope: "read", expiresAt: null })).toEqual(["key:3"])
    expect(invalidated({ kind: "session", jti: "j1" })).toBe("session:j1")
    expect(invalidated({ kind: "user", userId: 7 })).toBe("user:7")
    expect(invalidated({ kind: "api_key", keyId: 3 })).toBe("key:3")
  })
})
