// OpenAPI 3.1 generated from the route table, so the description can never drift from what the
// router enforces: the same zod schemas become the parameters, bodies and responses.
import { z } from "zod"
import { PERMISSION_TABLE, routePermission } from "../src/auth/permissions.js"
import { openApiWebhooks } from "../src/webhooks/catalogue.js"
import { ERROR_CODES } from "./error-map.js"
import type { FormSpec } from "./form.js"
import type { AnyRoute } from "./route.js"
import { ErrorBody, ValidationErrorBody } from "./schemas.js"

type JsonSchema = Record<string, unknown>

function toSchema(schema: z.ZodType): JsonSchema {
  // Input side: a path id is a string in the URL even though the handler sees a number.
  const s = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }) as JsonSchema
  delete s["$schema"]
  return s
}

function parameters(schema: z.ZodType | undefined, where: "path" | "query"): JsonSchema[] {
  if (!schema) return []
  const s = toSchema(schema)
  const props = (s["properties"] ?? {}) as Record<string, JsonSchema>
  const required = new Set((s["required"] ?? []) as string[])
  return Object.entries(props).map(([name, p]) => ({
    name,
    in: where,
    required: where === "path" || required.has(name),
    ...(typeof p["description"] === "string" && { description: p["description"] }),
    schema: p,
  }))
}

/** The error body with its code pointing at the closed list of codes (components.schemas.ErrorCode). */
function errorBodySchema(): JsonSchema {
  const s = toSchema(ErrorBody)
  const props = s["properties"] as Record<string, JsonSchema>
  return { ...s, properties: { ...props, code: { $ref: "#/components/schemas/ErrorCode" } } }
}

const errorResponse = (description: string, ref = "Error") => ({
  description,
  content: { "application/json": { schema: { $ref: `#/components/schemas/${ref}` } } },
})

/** Idempotent retries (api/pipeline/idempotency.ts): a header on every authenticated POST. */
const IDEMPOTENCY_KEY = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "Makes a retry safe: the first completed response for this key in the workspace is kept 24 hours and " +
    "replayed (with Idempotent-Replayed: true) to a retry with the same method, path, query, body and caller. " +
    "The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first is still running: 409 " +
    "IDEMPOTENCY_IN_PROGRESS. 5xx and 429 answers are not kept.",
  schema: { type: "string", minLength: 1, maxLength: 255 },
}

/** What the document says about the deployment it describes. */
export interface DocumentOptions {
  /** UPLOAD_LIMIT_BYTES: the largest multipart body. */
  readonly uploadLimitBytes?: number
}

/**
 * A declared multipart form (api/form.ts) as its schema and encoding: each part by name, the file
 * as binary with its media types, the required parts, and the limits.
 */
function formContent(form: FormSpec, opts: DocumentOptions): JsonSchema {
  const limit = opts.uploadLimitBytes
  const properties: Record<string, JsonSchema> = {}
  const encoding: Record<string, JsonSchema> = {}
  for (const [name, part] of Object.entries(form)) {
    if (part.kind === "file") {
      const [only, ...more] = part.mediaTypes
      properties[name] = {
        type: "string",
        format: "binary",
        contentMediaType: only !== undefined && more.length === 0 ? only : "application/octet-stream",
        description: part.description,
        ...(limit !== undefined && { maxLength: limit }),
      }
      encoding[name] = { contentType: part.mediaTypes.join(", ") }
    } else
      properties[name] = {
        type: "string",
        description: part.description,
        ...(part.required && { minLength: 1 }),
        ...(part.maxLength !== undefined && { maxLength: part.maxLength }),
      }
  }
  const bytes = limit === undefined ? "" : ` (${limit} bytes on this server)`
  return {
    schema: {
      type: "object",
      description: `The whole form may be at most UPLOAD_LIMIT_BYTES${bytes}; past that 413 PAYLOAD_TOO_LARGE.`,
      properties,
      required: Object.keys(form).filter((n) => form[n]!.required),
    },
    encoding,
  }
}

const SECURITY: Record<AnyRoute["auth"], unknown[]> = {
  public: [],
  jwt: [{ bearerJwt: [] }, { sessionCookie: [] }, { apiKey: [] }],
  "jwt-only": [{ bearerJwt: [] }, { sessionCookie: [] }],
  system: [{ systemKey: [] }],
}

function operation(r: AnyRoute, opts: DocumentOptions): JsonSchema {
  const responses: Record<string, unknown> = {}
  for (const [status, doc] of Object.entries(r.responses ?? { 200: { description: "OK" } })) {
    const contentType = doc.contentType ?? "application/json"
    responses[status] = {
      description: doc.description,
      content: {
        [contentType]: doc.schema ? { schema: toSchema(doc.schema) } : {},
        ...Object.fromEntries(
          (doc.alternatives ?? []).map((alt) => [alt.contentType, alt.schema ? { schema: toSchema(alt.schema) } : {}]),
        ),
      },
    }
  }
  const hasInput = r.params !== undefined || r.query !== undefined || (r.body !== undefined && !("raw" in r.body))
  if (hasInput) responses["422"] = errorResponse("Validation failed", "ValidationError")
  if (r.body && "json" in r.body && r.body.json) responses["400"] = errorResponse("Malformed JSON (BAD_JSON)")
  if (r.body) responses["413"] = errorResponse("Body too large")
  if (r.auth === "system") responses["401"] = errorResponse("Missing or wrong X-System-Key")
  if (r.auth === "jwt" || r.auth === "jwt-only") {
    responses["401"] = errorResponse("Not signed in, or the credential is invalid, expired or revoked")
    responses["403"] = errorResponse(
      r.auth === "jwt-only"
        ? "API keys are not accepted (API_KEY_NOT_ALLOWED), or CSRF"
        : "Insufficient scope, inactive account, or CSRF",
    )
  }
  const idempotent = r.method === "POST" && (r.auth === "jwt" || r.auth === "jwt-only")
  if (idempotent) {
    responses["409"] ??= errorResponse("Conflict (IDEMPOTENCY_IN_PROGRESS: a request with the same key is running)")
    responses["422"] ??= errorResponse("IDEMPOTENCY_KEY_REUSED: the key was used for another request")
  }
  const events = Object.values(r.responses ?? {}).some((d) => d.contentType?.startsWith("text/event-stream"))
  if (events && r.auth !== "public" && r.auth !== "system")
    responses["429"] = errorResponse(
      "RATE_LIMITED: the API key or session (SSE_MAX_STREAMS_PER_KEY), or the workspace " +
        "(SSE_MAX_STREAMS_PER_WORKSPACE), already holds its most open event streams; Retry-After says when to retry",
    )
  responses["default"] = errorResponse("Error")

  let requestBody: JsonSchema | undefined
  if (r.body) {
    const content: Record<string, unknown> = {}
    if ("raw" in r.body) content["*/*"] = { schema: { type: "string", format: "binary" } }
    else {
      if (r.body.json) content["application/json"] = { schema: toSchema(r.body.json) }
      if (r.body.multipart)
        content["multipart/form-data"] =
          "form" in r.body && r.body.form ? formContent(r.body.form, opts) : { schema: { type: "object" } }
    }
    requestBody = { required: true, content }
  }

  const pathId = r.path
    .replace(/[{}]/g, "")
    .replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())
  return {
    operationId: `${r.method.toLowerCase()}${pathId}`,
    summary: r.summary,
    tags: r.tags,
    security: SECURITY[r.auth],
    ...permissionDoc(r),
    parameters: [
      ...parameters(r.params, "path"),
      ...parameters(r.query, "query"),
      ...(idempotent ? [IDEMPOTENCY_KEY] : []),
    ],
    ...(requestBody && { requestBody }),
    responses,
  }
}

/**
 * A signed-in route's permission from the one table (src/auth/permissions.ts): its name, the roles
 * that hold it, and the API-key scope that does (`jwt` routes only).
 */
function permissionDoc(r: AnyRoute): Record<string, unknown> {
  if (r.auth !== "jwt" && r.auth !== "jwt-only") return {}
  const permission = routePermission(r.permission, r.method)
  const grant = PERMISSION_TABLE[permission]
  return {
    "x-permission": permission,
    "x-roles": grant.roles,
    ...(r.auth === "jwt" && grant.keyScope !== null && { "x-required-scope": grant.keyScope }),
  }
}

export function openApiDocument(routes: ReadonlyArray<AnyRoute>, opts: DocumentOptions = {}): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const r of routes) (paths[r.path] ??= {})[r.method.toLowerCase()] = operation(r, opts)
  return {
    openapi: "3.1.0",
    info: {
      title: "Parley voice-campaign API",
      version: "0.3.0",
      description:
        "Multi-tenant AI voice campaigns. Every path also answers under the /v1 prefix. Errors are {error, code, " +
        "field?}; " +
        "schema failures are 422 VALIDATION_FAILED with errors[].",
    },
    servers: [{ url: "/" }, { url: "/v1" }],
    paths,
    // The events we POST to a workspace's endpoints (src/webhooks/catalogue.ts).
    webhooks: openApiWebhooks(),
    components: {
      schemas: {
        ErrorCode: { type: "string", enum: [...ERROR_CODES], description: "Every code an error response can carry" },
        Error: errorBodySchema(),
        ValidationError: toSchema(ValidationErrorBody),
      },
      securitySchemes: {
        bearerJwt: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: "The token from POST /auth/login (7 days)",
        },
        sessionCookie: {
          type: "apiKey",
          in: "cookie",
          name: "svc_session",
          description: "Set by POST /auth/login; state changes need an allowed Origin",
        },
        apiKey: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "svc_live_…",
          description: "An API key; scope read, write or admin",
        },
        systemKey: { type: "apiKey", in: "header", name: "X-System-Key" },
      },
    },
  }
}
