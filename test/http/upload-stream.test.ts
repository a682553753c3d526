// Streamed multipart uploads (`multipart: "stream"` routes): the caller is authenticated before
// the body is read, the file arrives as a stream, the upload limit holds mid-stream, a malformed
// form is a 400, and a connection whose body was left unread is closed rather than reused.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { newProbeState, probeRoutes } from "../support/probes.js"
import { rawRequest } from "../support/raw-http.js"

let srv: TestServer
let user: Session

beforeAll(async () => {
  srv = await startTestServer({ extraRoutes: probeRoutes(newProbeState()), env: { UPLOAD_LIMIT_BYTES: "200000" } })
  user = await api(srv).signup()
})
afterAll(async () => srv?.stop())

const csvRow = (i: number) => `+1415555${String(i).padStart(4, "0")},Person ${i}`
const csv = (rows: number) => `phone,name\n${Array.from({ length: rows }, (_, i) => csvRow(i)).join("\n")}\n`

const post = (body: FormData | string, headers: Record<string, string> = {}) =>
  fetch(`${srv.url}/test/upload-stream`, {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${user.token}`, ...headers },
  })

describe("streamed multipart uploads", () => {
  it("hands the first file part to the handler as a stream", async () => {
    const text = csv(5000) // ~130 kB
    const form = new FormData()
    form.set("note", "ignored field")
    form.set("file", new Blob([text], { type: "text/csv" }), "audience.csv")
    form.append("second", new Blob(["not wanted"]), "b.csv")
    const res = await post(form)
    expect(res.status).toBe(200)
    const { file } = (await res.json()) as {
      file: { field: string; filename: string; bytes: number; lines: number; chunks: number }
    }
    expect(file).toMatchObject({ field: "file", filename: "audience.csv", bytes: Buffer.byteLength(text), lines: 5001 })
  })

  it("answers a form without a file with no file", async () => {
    const form = new FormData()
    form.set("note", "only a field")
    const res = await post(form)
    expect(await res.json()).toEqual({ file: null })
  })

  it("still takes JSON on the same route", async () => {
    const res = await post(JSON.stringify({ rows: [{ phone: "1" }] }), { "content-type": "application/json" })
    expect(await res.json()).toEqual({ json_rows: 1 })
  })

  it("authenticates before reading: an anonymous upload is 401 and its connection is closed", async () => {
    const body = `--b\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\n${csv(100)}\r\n--b--\r\n`
    const res = await rawRequest(
      srv.port,
      `POST /test/upload-stream HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=b\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    )
    expect(res.status).toBe(401)
    expect(JSON.parse(res.body)).toMatchObject({ code: "UNAUTHENTICATED" })
    expect(res.closed).toBe(true)
  })

  it("refuses a chunked upload with 413 as soon as it passes the limit", async () => {
    const head =
      `POST /test/upload-stream HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${user.token}\r\n` +
      "Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n"
    const piece = (s: string) => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`
    const pieces = [head, piece('--b\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\n')]
    const row = csv(2000) // ~52 kB per piece: the fourth passes 200 kB
    for (let i = 0; i < 5; i++) pieces.push(piece(row))
    pieces.push(piece("\r\n--b--\r\n"), "0\r\n\r\n")
    const res = await rawRequest(srv.port, pieces, { timeoutMs: 5_000 })
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" })
    expect(res.closed).toBe(true)
  })

  it("answers a form cut off before its end with 400 BAD_MULTIPART", async () => {
    // no closing boundary
    const body = `--b\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\n${csv(10)}`
    const res = await post(body, { "content-type": "multipart/form-data; boundary=b" })
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({ code: "BAD_MULTIPART" })
  })

  it("answers a multipart type without a boundary with 400 BAD_MULTIPART", async () => {
    const res = await post("garbage", { "content-type": "multipart/form-data" })
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({ code: "BAD_MULTIPART" })
  })

  it("keeps serving after all of that", async () => {
    const res = await fetch(`${srv.url}/healthz`)
    expect(res.status).toBe(200)
  })
})
