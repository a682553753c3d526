// A local S3 API (node:http on 127.0.0.1), path-style: PUT, GET (Range → 206 with Content-Range, 416
// when unsatisfiable), HEAD and DELETE of objects in its buckets, kept in memory. Every request must
// carry AWS Signature V4 in its Authorization header, checked by this file's own implementation
// (canonical request, string to sign, the HMAC chain from the secret; node:crypto, not the client's
// signer): a wrong signature is 403 SignatureDoesNotMatch, an unknown key 403 InvalidAccessKeyId,
// a body that is not what x-amz-content-sha256 says 400 XAmzContentSHA256Mismatch, as S3 answers.
// Faults: the next requests fail with a status, hang unanswered, or stall partway through a body.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface FakeS3Object {
  readonly bytes: Buffer
  readonly contentType: string
  readonly etag: string
}

export interface FakeS3Request {
  readonly method: string
  /** The path as sent (percent-encoded), query included. */
  readonly path: string
  readonly range: string | undefined
  readonly status: number
  /** The S3 error code answered, if any. */
  readonly code: string | undefined
}

/** The next request's fate: a status with S3's error body, no answer at all, or half a body then silence. */
export type FakeS3Fault = { readonly status: number; readonly code?: string } | "hang" | "stall"

export interface FakeS3 {
  /** The endpoint (S3_ENDPOINT): objects are at {url}/{bucket}/{key}. */
  readonly url: string
  readonly bucket: string
  readonly region: string
  readonly accessKeyId: string
  readonly secretAccessKey: string
  /** The settings a store needs for this server's bucket. */
  readonly settings: {
    endpoint: string
    bucket: string
    region: string
    accessKeyId: string
    secretAccessKey: string
  }
  /** Objects by bucket and key: "bucket/key" (the key decoded). */
  readonly objects: Map<string, FakeS3Object>
  readonly requests: FakeS3Request[]
  /** The object under `key` in the default bucket. */
  object(key: string): FakeS3Object | undefined
  /** Keys of the default bucket's objects. */
  keys(): string[]
  /** The next `n` requests meet `fault` (before their signature is looked at, as a proxy's 503 would). */
  fail(n: number, fault: FakeS3Fault): void
  reset(): void
  close(): Promise<void>
}

/** How far x-amz-date may be from the server's clock (S3's 15 minutes). */
const MAX_SKEW_MS = 15 * 60_000

const xml = (code: string, message: string, extra: Record<string, string> = {}) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>${Object.entries(
    extra,
  )
    .map(([k, v]) => `<${k}>${v}</${k}>`)
    .join("")}<RequestId>${randomBytes(8).toString("hex").toUpperCase()}</RequestId></Error>`

const MESSAGES: Record<string, string> = {
  AccessDenied: "Access Denied",
  AuthorizationHeaderMalformed: "The authorization header is malformed.",
  InternalError: "We encountered an internal error. Please try again.",
  InvalidAccessKeyId: "The AWS Access Key Id you provided does not exist in our records.",
  InvalidRange: "The requested range is not satisfiable",
  MethodNotAllowed: "The specified method is not allowed against this resource.",
  NoSuchBucket: "The specified bucket does not exist",
  NoSuchKey: "The specified key does not exist.",
  RequestTimeTooSkewed: "The difference between the request time and the current time is too large.",
  ServiceUnavailable: "Please reduce your request rate.",
  SignatureDoesNotMatch:
    "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
  SlowDown: "Please reduce your request rate.",
  XAmzContentSHA256Mismatch: "The provided 'x-amz-content-sha256' header does not match what was computed.",
}

// --- Signature V4, as the S3 documentation defines it ------------------------------------------

/** RFC 3986 percent-encoding of everything but the unreserved characters. */
const uriEncode = (s: string): string =>
  Array.from(Buffer.from(s, "utf8"))
    .map((b) => {
      const c = String.fromCharCode(b)
      return /[A-Za-z0-9\-._~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, "0")}`
    })
    .join("")

/** S3's canonical URI: each segment of the path decoded and encoded once (slashes kept). */
const canonicalUri = (rawPath: string): string =>
  rawPath
    .split("/")
    .map((seg) => uriEncode(decodeURIComponent(seg)))
    .join("/")

/** The query's pairs, each name and value encoded, sorted by name then value. */
function canonicalQuery(rawQuery: string): string {
  if (rawQuery === "") return ""
  return rawQuery
    .split("&")
    .filter((p) => p !== "")
    .map((p) => {
      const eq = p.indexOf("=")
      const [k, v] = eq < 0 ? [p, ""] : [p.slice(0, eq), p.slice(eq + 1)]
      const dec = (x: string) => decodeURIComponent(x.replace(/\+/g, " "))
      return [uriEncode(dec(k)), uriEncode(dec(v))] as const
    })
    .sort(([k1, v1], [k2, v2]) => (k1 < k2 ? -1 : k1 > k2 ? 1 : v1 < v2 ? -1 : v1 > v2 ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&")
}

/** Every value a header was sent with, trimmed and with inner runs of spaces made one, comma-joined. */
function headerValue(req: IncomingMessage, name: string): string | undefined {
  const values: string[] = []
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.toLowerCase() === name) values.push(req.rawHeaders[i + 1]!.trim().replace(/ +/g, " "))
  return values.length === 0 ? undefined : values.join(",")
}

const hmac = (key: Buffer | string, data: string): Buffer => createHmac("sha256", key).update(data, "utf8").digest()
const sha256hex = (data: Buffer | string): string => createHash("sha256").update(data).digest("hex")

/** AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request, SignedHeaders=…, Signature=…. */
const AUTHORIZATION = new RegExp(
  "^AWS4-HMAC-SHA256 Credential=([^/\\s,]+)/(\\d{8})/([^/\\s,]+)/([^/\\s,]+)/aws4_request," +
    "\\s*SignedHeaders=([a-z0-9;-]+),\\s*Signature=([0-9a-f]{64})$",
)

interface Verdict {
  readonly status: number
  readonly code: string
  readonly extra?: Record<string, string>
}

/** Checks the request's Authorization header; undefined when it is signed right. */
function verifySignature(
  req: IncomingMessage,
  body: Buffer,
  keys: ReadonlyMap<string, string>,
  region: string,
): Verdict | undefined {
  const auth = req.headers.authorization
  if (auth === undefined) return { status: 403, code: "AccessDenied" }
  const m = AUTHORIZATION.exec(auth)
  if (m === null) return { status: 400, code: "AuthorizationHeaderMalformed" }
  const [, accessKeyId, date, credRegion, service, signedHeaders, signature] = m as unknown as string[]
  const secret = keys.get(accessKeyId!)
  if (secret === undefined) return { status: 403, code: "InvalidAccessKeyId", extra: { AWSAccessKeyId: accessKeyId! } }
  if (credRegion !== region || service !== "s3")
    return { status: 400, code: "AuthorizationHeaderMalformed", extra: { Region: region } }
  const amzDate = headerValue(req, "x-amz-date")
  if (amzDate === undefined || !/^\d{8}T\d{6}Z$/.test(amzDate) || amzDate.slice(0, 8) !== date)
    return { status: 403, code: "AccessDenied" }
  const at = Date.UTC(
    Number(amzDate.slice(0, 4)),
    Number(amzDate.slice(4, 6)) - 1,
    Number(amzDate.slice(6, 8)),
    Number(amzDate.slice(9, 11)),
    Number(amzDate.slice(11, 13)),
    Number(amzDate.slice(13, 15)),
  )
  if (Math.abs(Date.now() - at) > MAX_SKEW_MS) return { status: 403, code: "RequestTimeTooSkewed" }
  const names = signedHeaders!.split(";")
  if (!names.includes("host") || !names.includes("x-amz-date") || !names.includes("x-amz-content-sha256"))
    return { status: 403, code: "SignatureDoesNotMatch" }
  const payloadHash = headerValue(req, "x-amz-content-sha256")!
  const [rawPath, rawQuery = ""] = (req.url ?? "/").split("?", 2) as [string, string?]
  const canonicalRequest = [
    req.method ?? "",
    canonicalUri(rawPath),
    canonicalQuery(rawQuery),
    `${names.map((n) => `${n}:${headerValue(req, n) ?? ""}`).join("\n")}\n`,
    signedHeaders,
    payloadHash,
  ].join("\n")
  const scope = `${date}/${credRegion}/s3/aws4_request`
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256hex(canonicalRequest)].join("\n")
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${secret}`, date!), credRegion!), "s3"), "aws4_request")
  const expected = hmac(signingKey, stringToSign)
  if (!timingSafeEqual(expected, Buffer.from(signature!, "hex")))
    return { status: 403, code: "SignatureDoesNotMatch", extra: { AWSAccessKeyId: accessKeyId! } }
  if (payloadHash !== "UNSIGNED-PAYLOAD" && payloadHash !== sha256hex(body))
    return { status: 400, code: "XAmzContentSHA256Mismatch" }
  return undefined
}

// --- the server ----------------------------------------------------------------------------------

/** The byte range a Range header asks of `size` bytes: [start, end], "unsatisfiable", or undefined for none. */
function rangeOf(header: string | undefined, size: number): [number, number] | "unsatisfiable" | undefined {
  if (header === undefined) return undefined
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (m === null || (m[1] === "" && m[2] === "")) return undefined // S3 ignores a Range it cannot parse
  if (m[1] === "") {
    const suffix = Number(m[2])
    if (suffix === 0 || size === 0) return "unsatisfiable"
    return [Math.max(0, size - suffix), size - 1]
  }
  const start = Number(m[1])
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1)
  if (m[2] !== "" && Number(m[2]) < start) return undefined
  return start >= size ? "unsatisfiable" : [start, end]
}

export async function startFakeS3(
  o: { bucket?: string; region?: string; accessKeyId?: string; secretAccessKey?: string } = {},
): Promise<FakeS3> {
  const bucket = o.bucket ?? "recordings"
  const region = o.region ?? "us-east-1"
  const accessKeyId = o.accessKeyId ?? "AKIAFAKES3TESTKEY000"
  const secretAccessKey = o.secretAccessKey ?? randomBytes(30).toString("base64")
  const keys = new Map([[accessKeyId, secretAccessKey]])
  const buckets = new Set([bucket])
  const objects = new Map<string, FakeS3Object>()
  const requests: FakeS3Request[] = []
  const faults: FakeS3Fault[] = []
  const held = new Set<ServerResponse>()

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => handle(req, res, Buffer.concat(chunks)))
  })

  function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    const method = req.method ?? ""
    const record = (status: number, code?: string) =>
      requests.push({ method, path: req.url ?? "", range: req.headers.range, status, code })
    const error = (status: number, code: string, extra: Record<string, string> = {}, headers = {}) => {
      record(status, code)
      const text = method === "HEAD" ? "" : xml(code, MESSAGES[code] ?? code, extra)
      res.writeHead(status, {
        "content-type": "application/xml",
        "content-length": Buffer.byteLength(text),
        ...headers,
      })
      res.end(text)
    }
    const fault = faults.shift()
    if (fault === "hang") {
      record(0, "hang")
      held.add(res)
      return
    }
    if (fault !== undefined && fault !== "stall")
      return error(fault.status, fault.code ?? (fault.status === 503 ? "SlowDown" : "InternalError"))

    const verdict = verifySignature(req, body, keys, region)
    if (verdict !== undefined) return error(verdict.status, verdict.code, verdict.extra)

    const [rawPath] = (req.url ?? "/").split("?", 1) as [string]
    const slash = rawPath.indexOf("/", 1)
    const bucketName = decodeURIComponent(rawPath.slice(1, slash < 0 ? undefined : slash))
    const key = slash < 0 ? "" : decodeURIComponent(rawPath.slice(slash + 1))
    if (!buckets.has(bucketName)) return error(404, "NoSuchBucket", { BucketName: bucketName })
    if (key === "") return error(405, "MethodNotAllowed")
    const id = `${bucketName}/${key}`

    if (method === "PUT") {
      const etag = `"${createHash("md5").update(body).digest("hex")}"`
      objects.set(id, { bytes: body, contentType: req.headers["content-type"] ?? "binary/octet-stream", etag })
      record(200)
      res.writeHead(200, { etag, "content-length": 0 })
      return void res.end()
    }
    if (method === "DELETE") {
      objects.delete(id)
      record(204)
      res.writeHead(204)
      return void res.end()
    }
    if (method !== "GET" && method !== "HEAD") return error(405, "MethodNotAllowed")
    const obj = objects.get(id)
    if (obj === undefined) return error(404, "NoSuchKey", { Key: key })
    const size = obj.bytes.byteLength
    const range = rangeOf(req.headers.range, size)
    if (range === "unsatisfiable")
      return error(
        416,
        "InvalidRange",
        { RangeRequested: req.headers.range ?? "" },
        { "content-range": `bytes */${size}` },
      )
    const [start, end] = range ?? [0, size - 1]
    const status = range === undefined ? 200 : 206
    record(status)
    res.writeHead(status, {
      "content-type": obj.contentType,
      "content-length": end - start + 1,
      etag: obj.etag,
      "accept-ranges": "bytes",
      ...(range !== undefined && { "content-range": `bytes ${start}-${end}/${size}` }),
    })
    if (method === "HEAD") return void res.end()
    const part = obj.bytes.subarray(start, end + 1)
    if (fault === "stall") {
      // Half the body, then nothing more: the client's wait for the next bytes must end it.
      res.write(part.subarray(0, Math.floor(part.byteLength / 2)))
      held.add(res)
      return
    }
    // In pieces, so a client really streams it.
    for (let at = 0; at < part.byteLength; at += 64 * 1024) res.write(part.subarray(at, at + 64 * 1024))
    res.end()
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    bucket,
    region,
    accessKeyId,
    secretAccessKey,
    settings: { endpoint: url, bucket, region, accessKeyId, secretAccessKey },
    objects,
    requests,
    object: (key) => objects.get(`${bucket}/${key}`),
    keys: () => [...objects.keys()].filter((k) => k.startsWith(`${bucket}/`)).map((k) => k.slice(bucket.length + 1)),
    fail: (n, fault) => {
      for (let i = 0; i < n; i++) faults.push(fault)
    },
    reset() {
      faults.length = 0
      requests.length = 0
      for (const r of held) r.destroy()
      held.clear()
    },
    async close() {
      for (const r of held) r.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
