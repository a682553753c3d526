// Issue 32: every multipart request body in /openapi.json is described (each part by name, the
// file as binary with its media types in the encoding, the required parts, the upload limit), a
// client that knows only the document clones a voice with it, and the reader holds each form to
// the same declaration.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Session } from "../support/clients.js"
import { startTestServer, type TestServer } from "../support/harness.js"
import { wav } from "../voices/fixtures.js"

const UPLOAD_LIMIT = 2_000_000

interface Schema {
  type?: string
  format?: string
  contentMediaType?: string
  description?: string
  minLength?: number
  maxLength?: number
  properties?: Record<string, Schema>
  required?: string[]
}
interface FormMedia {
  schema?: Schema
  encoding?: Record<string, { contentType?: string }>
}
interface Operation {
  requestBody?: { content?: Record<string, FormMedia> }
}

let srv: TestServer
let s: Session
let paths: Record<string, Record<string, Operation>>
beforeAll(async () => {
  srv = await startTestServer({ env: { UPLOAD_LIMIT_BYTES: String(UPLOAD_LIMIT) } })
  s = await api(srv).signup({ country: "US" })
  paths = ((await (await fetch(`${srv.url}/openapi.json`)).json()) as { paths: typeof paths }).paths
})
afterAll(async () => srv?.stop())

/** Every operation of the document that takes multipart/form-data, as "METHOD path". */
const multipartBodies = (): Array<[string, FormMedia]> =>
  Object.entries(paths).flatMap(([path, ops]) =>
    Object.entries(ops).flatMap(([method, op]): Array<[string, FormMedia]> => {
      const media = op.requestBody?.content?.["multipart/form-data"]
      return media === undefined ? [] : [[`${method.toUpperCase()} ${path}`, media]]
    }),
  )

/** The form's one file part, found as a generated client finds it: binary, with a media type. */
const filePart = (schema: Schema | undefined): string[] =>
  Object.entries(schema?.properties ?? {})
    .filter(([, p]) => p.type === "string" && p.format === "binary" && typeof p.contentMediaType === "string")
    .map(([name]) => name)

const formOf = (path: string): FormMedia => paths[path]!.post!.requestBody!.content!["multipart/form-data"]!

describe("multipart bodies in /openapi.json", () => {
  it("each names its parts, its binary file with the encoding media types, the required parts, the limit", () => {
    const bodies = multipartBodies()
    expect(bodies.map(([op]) => op)).toEqual(
      expect.arrayContaining([
        "POST /api/voice-avatars/clone",
        "POST /demo/clone-voice",
        "POST /data/sources",
        "POST /api/workflows/{id}/audience",
        "POST /dnc/import",
      ]),
    )
    for (const [op, { schema, encoding }] of bodies) {
      expect(schema?.type, op).toBe("object")
      expect(Object.keys(schema?.properties ?? {}).length, op).toBeGreaterThan(0)
      const files = filePart(schema)
      expect(files, op).toHaveLength(1)
      const file = files[0]!
      expect(encoding?.[file]?.contentType, op).toMatch(/^[\w.+-]+\/[\w.+-]+(, [\w.+-]+\/[\w.+-]+)*$/)
      expect(schema?.properties?.[file]?.maxLength, op).toBe(UPLOAD_LIMIT)
      expect(schema?.description, op).toMatch(/UPLOAD_LIMIT_BYTES \(2000000 bytes/)
      expect(schema?.required, op).toContain(file)
      for (const name of schema?.required ?? []) expect(schema?.properties, op).toHaveProperty(name)
    }
  })

  it("the clone form as its route reads it: a required name of at most 100 characters and an audio sample", () => {
    const { schema, encoding } = formOf("/api/voice-avatars/clone")
    expect(filePart(schema)).toEqual(["sample"])
    expect(encoding?.["sample"]?.contentType).toBe("audio/wav, audio/mpeg, audio/ogg, audio/webm")
    expect(schema?.properties?.["name"]).toMatchObject({ type: "string", minLength: 1, maxLength: 100 })
    expect([...(schema?.required ?? [])].sort()).toEqual(["name", "sample"])
    // The demo's name is optional: the service names the voice itself.
    expect(formOf("/demo/clone-voice").schema?.required).toEqual(["sample"])
  })
})

describe("a client that knows only the document", () => {
  it("clones a voice: the form built from the document's parts passes validation (201)", async () => {
    const { schema, encoding } = formOf("/api/voice-avatars/clone")
    const form = new FormData()
    for (const name of schema?.required ?? []) {
      const part = schema!.properties![name]!
      if (part.format === "binary") {
        const type = encoding![name]!.contentType!.split(", ")[0]!
        form.set(name, new Blob([wav({ hz: 140, seconds: 6 })], { type }), "clip.wav")
      } else form.set(name, "From the document".slice(0, part.maxLength))
    }
    const res = await fetch(`${srv.url}/api/voice-avatars/clone`, {
      method: "POST",
      body: form,
      headers: { authorization: `Bearer ${s.token}` },
    })
    expect(res.status, await res.clone().text()).toBe(201)
    expect(await res.json()).toMatchObject({ name: "From the document", format: "wav", duration_ms: 6000 })
  })

  it("a CSV in a field the document does not name is 422 on the documented file part", async () => {
    for (const path of ["/dnc/import", "/data/sources"]) {
      const [file] = filePart(formOf(path).schema)
      const form = new FormData()
      form.set("upload", new Blob(["phone\n+14155550100\n"], { type: "text/csv" }), "a.csv")
      const res = await fetch(srv.url + path, {
        method: "POST",
        body: form,
        headers: { authorization: `Bearer ${s.token}` },
      })
      expect(res.status, path).toBe(422)
      const body = (await res.json()) as { code: string; field: string; error: string }
      expect(body, path).toMatchObject({ code: "VALIDATION_FAILED", field: file })
      expect(body.error, path).toMatch(/form field "upload"/)
    }
  })
})
