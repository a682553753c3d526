// What one entry of the route table declares: method, path, auth level, zod schemas for params,
// query and body, and the handler. The router enforces the declarations before the handler runs.
import type { Readable } from "node:stream"
import type { Effect } from "effect"
import type { z } from "zod"
import type { Permission } from "../src/auth/permissions.js"
import type { Principal } from "../src/auth/principal.js"
import type { DomainError } from "../src/platform/errors.js"
import type { FormSpec } from "./form.js"
import type { Reply } from "./reply.js"
import type { ApiServices } from "./services.js"

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

/**
 * Who may call a route. `public`: anyone. `jwt`: a signed-in user (bearer JWT or session cookie)
 * or an API key of the route's scope. `jwt-only`: a signed-in user; API keys get 403.
 * `system`: internal callers presenting the deployment's SYSTEM_KEY in X-System-Key (routes are
 * 404 while SYSTEM_KEY is unset).
 */
export type AuthLevel = "public" | "jwt" | "jwt-only" | "system"

/** How the request body is taken. Absent: the route takes no body (any sent is ignored). */
export type BodySpec<B> =
  /** application/json validated by the schema. */
  | { readonly json: z.ZodType<B>; readonly multipart?: false }
  /** application/json validated by the schema, or multipart/form-data handed over as parts. */
  | { readonly json: z.ZodType<B>; readonly multipart: true }
  /** multipart/form-data only. */
  | { readonly json?: undefined; readonly multipart: true }
  /**
   * application/json validated by the schema, or multipart/form-data streamed to the handler as
   * `upload` (large files: the caller is authenticated before the first byte is read, and the
   * body is read only as fast as the handler consumes it). `form` declares the parts: the reader
   * refuses a form that is not as declared (422) and /openapi.json describes it. Every route of
   * the table declares one (test/http/openapi-multipart.test.ts).
   */
  | { readonly json: z.ZodType<B>; readonly multipart: "stream"; readonly form?: FormSpec }
  /** multipart/form-data only, streamed to the handler as `upload`. */
  | { readonly json?: undefined; readonly multipart: "stream"; readonly form?: FormSpec }
  /**
   * Any content type, as exact bytes (webhooks verify signatures over them). `limit: "upload"`
   * takes up to the upload limit instead of the JSON one (file imports sent as the body itself).
   */
  | { readonly raw: true; readonly limit?: "upload" }

export interface Part {
  readonly name: string
  readonly data: Buffer
  readonly filename: string | undefined
  readonly type: string | undefined
}

/** A file part of a streamed multipart upload. */
export interface UploadedFile {
  /** The form field the file came in. */
  readonly field: string
  readonly filename: string | undefined
  readonly type: string | undefined
  /**
   * The file's bytes as they arrive. It fails with a DomainError (PayloadTooLarge past the upload
   * limit, BadRequestBody for a malformed form) or with ClientGone when the client goes away.
   */
  readonly stream: Readable
}

/** A multipart/form-data body that is still arriving. */
export interface Upload {
  /**
   * The form's first file part; undefined once the form has ended without one. Other parts are
   * read and discarded. Call it once. On a route that declares its `form`, it (and `fields`)
   * rejects with ValidationFailed when the file came in another field or a required part did not.
   */
  file(): Promise<UploadedFile | undefined>
  /**
   * The form's text fields (the first value of each name), once the whole form has been read:
   * read the file to its end first, or this waits for ever. Rejects as the file stream does.
   */
  fields(): Promise<Readonly<Record<string, string>>>
}

export interface RequestContext<P, Q, B> {
  readonly requestId: string
  readonly method: Method
  /** The path as received, without the /v1 prefix and without the query string. */
  readonly path: string
  /** The query string exactly as received (no leading "?"); signed webhooks need the original. */
  readonly rawQuery: string
  readonly params: P
  readonly query: Q
  /** The validated JSON body; undefined when the route takes none or a multipart body came. */
  readonly body: B | undefined
  /** The streamed multipart body, on `multipart: "stream"` routes when the request sent one. */
  readonly upload: Upload | undefined
  /** multipart/form-data parts, when the route accepts them and the request sent them. */
  readonly parts: ReadonlyArray<Part> | undefined
  /** The exact request body bytes. */
  readonly rawBody: Buffer
  /** Header names lower-cased; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  /** The socket's peer (a proxy, behind one); trust decisions about the connection use this. */
  readonly remoteAddress: string
  /** The client's address: X-Forwarded-For's when the peer is a trusted proxy (see api/pipeline/client-address.ts). */
  readonly clientIp: string
  /** The caller of a `jwt` or `jwt-only` route; undefined on public and system routes. */
  readonly principal: Principal | undefined
  /** The X-Tenant-Id of a `system` request, when it sent one. */
  readonly systemTenantId: number | undefined
  /** Called once when the client goes away before the reply is complete. */
  onAbort(cb: () => void): void
}

export interface ResponseDoc {
  readonly description: string
  readonly contentType?: string
  readonly schema?: z.ZodType
  /** Other representations of the same answer, by content negotiation (a CSV beside the JSON). */
  readonly alternatives?: ReadonlyArray<{ readonly contentType: string; readonly schema?: z.ZodType }>
}

export interface Route<P = unknown, Q = unknown, B = unknown> {
  readonly method: Method
  /** OpenAPI-style template: `/api/workflows/{id}`. */
  readonly path: string
  readonly auth: AuthLevel
  /**
   * What a `jwt` or `jwt-only` route needs, from the one permission table
   * (src/auth/permissions.ts: which roles and which API-key scope hold it): by default read for
   * GET, write otherwise; supervise for a supervisor's work (approvals, feedback); admin for the
   * destructive actions of spec section 5, members and money settings; owner for a transfer.
   */
  readonly permission?: Permission
  /**
   * `service`: the route's service writes its own audit entries (with the state before and
   * after). Otherwise a change needing admin or owner is logged by the pipeline once it succeeded.
   */
  readonly audit?: "service"
  /**
   * The answer carries a secret shown once (an API key, a signing secret): an Idempotency-Key
   * replay of it is kept sealed under the client's key (src/idempotency/), never readable at rest.
   */
  readonly secretInAnswer?: true
  /**
   * A GET answered from the workspace's kept answer while nothing it reads has changed
   * (api/pipeline/cached-reads.ts). The handler's answer must depend on nothing but the workspace,
   * the path's parameters and the query string (not on the caller's role or key), and on time only
   * through the reply's freshForMs; it must answer bytes (sharedJson does).
   */
  readonly cached?: true
  /** A public GET whose answer never changes: written in the request callback, the handler unused. */
  readonly constant?: Reply
  /** Status for schema failures: 422, unless the spec names another (API-key create: 400). */
  readonly validationStatus?: 400 | 422
  readonly summary: string
  readonly tags: ReadonlyArray<string>
  readonly params?: z.ZodType<P>
  readonly query?: z.ZodType<Q>
  readonly body?: BodySpec<B>
  readonly responses?: Readonly<Record<number, ResponseDoc>>
  readonly handler: (ctx: RequestContext<P, Q, B>) => Effect.Effect<Reply, DomainError, ApiServices>
}

/** Declares a route with its types inferred from its schemas. */
export function route<P = undefined, Q = undefined, B = undefined>(def: Route<P, Q, B>): Route<P, Q, B> {
  return def
}

// The table holds routes of many shapes; the router only needs them as this erased form.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
// biome-ignore lint/suspicious/noExplicitAny: the table holds routes of every parameter, query and body type
export type AnyRoute = Route<any, any, any>
