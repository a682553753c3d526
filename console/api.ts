// The console's one way to the public API: same-origin JSON with the svc_session cookie, errors
// as ApiError in words (words.ts), and a 401 anywhere sends the app back to sign-in.
import { errorWords } from "./words.js"

/** An answer outside 2xx, in the contract's shape {error, code, field?}. */
export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly field: string | undefined
  /** Every failing field, when the API lists them (VALIDATION_FAILED, RULE_BOOK_INVALID). */
  readonly errors: ReadonlyArray<{ readonly field: string; readonly message: string }>
  /** The whole answer, for what a code carries beside its words (WORKFLOW_NOT_READY's `missing`). */
  readonly body: Readonly<Record<string, unknown>>
  /** From Retry-After (or the body's retry_after_seconds) on a 429. */
  readonly retryAfterSeconds: number | undefined

  constructor(
    status: number,
    code: string,
    message: string,
    field?: string,
    errors: ReadonlyArray<{ readonly field: string; readonly message: string }> = [],
    body: Readonly<Record<string, unknown>> = {},
    retryAfterSeconds?: number,
  ) {
    super(message)
    this.name = "ApiError"
    this.status = status
    this.code = code
    this.field = field
    this.errors = errors
    this.body = body
    this.retryAfterSeconds = retryAfterSeconds
  }

  /** The message for one field, if the API named it. */
  fieldError(field: string): string | undefined {
    return this.errors.find((e) => e.field === field)?.message ?? (this.field === field ? this.message : undefined)
  }
}

type Listener = () => void
const expiredListeners = new Set<Listener>()
const refusedListeners = new Set<Listener>()

/**
 * Called whenever the API answers 401, or 403 ACCOUNT_INACTIVE: the session is gone (expired,
 * signed out elsewhere, or the account removed from its workspace or left it).
 */
export function onSessionExpired(cb: Listener): () => void {
  expiredListeners.add(cb)
  return () => expiredListeners.delete(cb)
}

/**
 * Called whenever the API refuses a call for the caller's role (403 INSUFFICIENT_ROLE): the role may
 * have changed since the page read it, so the app reads /auth/me again.
 */
export function onRoleRefused(cb: Listener): () => void {
  refusedListeners.add(cb)
  return () => refusedListeners.delete(cb)
}

const SIGN_IN = new Set(["/auth/login", "/auth/otp/start", "/auth/otp/resend", "/auth/otp/verify", "/auth/signup"])

function sessionExpired(): void {
  for (const cb of expiredListeners) cb()
}

/** Tells the app about a refusal for the caller's role, or an account no longer active; passes the error on. */
function refused(e: ApiError): ApiError {
  if (e.status === 403 && e.code === "INSUFFICIENT_ROLE") for (const cb of refusedListeners) cb()
  if (e.status === 403 && e.code === "ACCOUNT_INACTIVE") sessionExpired()
  return e
}

/** An error that never reached the server, in words. */
const networkError = () =>
  new ApiError(
    0,
    "NETWORK",
    errorWords({ code: "NETWORK", status: 0, message: "", body: {}, errors: [], retryAfterSeconds: undefined }),
  )

/** Turns any response body into an ApiError in words, whatever the server (or a proxy) sent. */
function toError(status: number, body: unknown, retryAfter: string | null = null): ApiError {
  const b = (body !== null && typeof body === "object" ? body : {}) as Record<string, unknown>
  const code = typeof b["code"] === "string" ? b["code"] : `HTTP_${status}`
  const message = typeof b["error"] === "string" ? b["error"] : `The server answered ${status}.`
  const field = typeof b["field"] === "string" ? b["field"] : undefined
  const errors = Array.isArray(b["errors"])
    ? (b["errors"] as unknown[])
        .filter((x): x is { field: unknown; message: unknown } => x !== null && typeof x === "object")
        .map((x) => ({ field: String(x.field ?? ""), message: String(x.message ?? "") }))
    : []
  const fromHeader = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined
  const retryAfterSeconds =
    typeof b["retry_after_seconds"] === "number" ? (b["retry_after_seconds"] as number) : fromHeader
  const words = errorWords({ code, status, message, body: b, errors, retryAfterSeconds })
  return new ApiError(status, code, words, field, errors, b, retryAfterSeconds)
}

async function readBody(res: Response): Promise<unknown> {
  const text = await res.text()
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * One JSON request. Cookie-authenticated changes need an allowed Origin, which the browser sends
 * by itself on same-origin fetches; nothing else is needed for CSRF.
 */
export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: { Accept: "application/json" } }
  if (body !== undefined) {
    init.headers = { Accept: "application/json", "Content-Type": "application/json" }
    init.body = JSON.stringify(body)
  }
  let res: Response
  try {
    res = await fetch(path, init)
  } catch {
    throw networkError()
  }
  const parsed = await readBody(res)
  if (res.ok) return parsed as T
  // A 401 from a sign-in attempt is a wrong password or code, not an ended session.
  if (res.status === 401 && !SIGN_IN.has(path)) sessionExpired()
  throw refused(toError(res.status, parsed, res.headers.get("Retry-After")))
}

/** A binary resource (audio) as a blob: URL, which the CSP's media-src allows. Revoke it when done. */
export async function blobUrl(path: string): Promise<string> {
  let res: Response
  try {
    res = await fetch(path, { credentials: "same-origin" })
  } catch {
    throw networkError()
  }
  if (!res.ok) {
    if (res.status === 401) sessionExpired()
    throw refused(toError(res.status, await readBody(res), res.headers.get("Retry-After")))
  }
  return URL.createObjectURL(await res.blob())
}

/**
 * Why the server refuses an event stream, which EventSource does not say: the same GET by fetch, its
 * error in words (a 401 signs the app out, as any request's does); undefined when it would be let in
 * now (that stream is closed at once).
 */
export async function streamRefusal(path: string): Promise<ApiError | undefined> {
  const abort = new AbortController()
  let res: Response
  try {
    res = await fetch(path, { credentials: "same-origin", signal: abort.signal })
  } catch {
    return networkError()
  }
  if (res.ok) {
    abort.abort()
    return undefined
  }
  if (res.status === 401) sessionExpired()
  return refused(toError(res.status, await readBody(res), res.headers.get("Retry-After")))
}

/**
 * A multipart upload with progress (fetch cannot report upload progress; XMLHttpRequest can).
 * `onProgress` gets a fraction 0..1 as the bytes leave.
 */
export function upload<T>(path: string, form: FormData, onProgress: (fraction: number) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open("POST", path)
    xhr.withCredentials = true
    xhr.setRequestHeader("Accept", "application/json")
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total > 0) onProgress(e.loaded / e.total)
    }
    xhr.onerror = () => reject(networkError())
    xhr.onload = () => {
      let body: unknown
      try {
        body = xhr.responseText === "" ? undefined : JSON.parse(xhr.responseText)
      } catch {
        body = xhr.responseText
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1)
        resolve(body as T)
        return
      }
      if (xhr.status === 401) sessionExpired()
      reject(refused(toError(xhr.status, body, xhr.getResponseHeader("Retry-After"))))
    }
    xhr.send(form)
  })
}

/** An error in words for the page: ApiError's message, or a generic line for anything else. */
export function describe(e: unknown): string {
  if (e instanceof ApiError) return e.message
  return errorWords({ code: "INTERNAL", status: 500, message: "", body: {}, errors: [], retryAfterSeconds: undefined })
}
