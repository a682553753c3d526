// A multipart form's parts, declared once on the route (`body.form`): the upload reader
// (api/upload.ts) holds each form to the declaration and the OpenAPI document (api/openapi.ts)
// describes it from the same entry, so a field name is written in one place.
import { ValidationFailed } from "../src/platform/errors.js"

/** A file part. The reader hands the handler the form's first file, so a form declares at most one. */
export interface FilePart {
  readonly kind: "file"
  /** The media types the part may be sent as (the OpenAPI encoding's contentType). */
  readonly mediaTypes: ReadonlyArray<string>
  readonly required: boolean
  readonly description: string
}

/** A text field; the reader keeps the first value of each name. */
export interface TextPart {
  readonly kind: "text"
  /** Required: present and not blank. */
  readonly required: boolean
  /** In characters, as sent. */
  readonly maxLength?: number
  readonly description: string
}

export type FormPart = FilePart | TextPart

/** A multipart/form-data body's parts by field name; parts not declared are read and ignored. */
export type FormSpec = Readonly<Record<string, FormPart>>

const refused = (field: string, message: string) =>
  new ValidationFailed({ message: `${field}: ${message}`, errors: [{ field, message }] })

const declared = (form: FormSpec, name: string): FormPart | undefined =>
  Object.hasOwn(form, name) ? form[name] : undefined

const fileFields = (form: FormSpec): string[] => Object.keys(form).filter((n) => form[n]!.kind === "file")

/** Why the form's first file may not come in form field `field` (undefined: it may). */
export function fileRefused(form: FormSpec, field: string): ValidationFailed | undefined {
  if (declared(form, field)?.kind === "file") return undefined
  const expected = fileFields(form)
  if (expected.length === 0) return refused(field, "this form takes no file")
  const names = expected.map((n) => `"${n}"`).join(" or ")
  return refused(expected[0]!, `is required: the file came in form field "${field}", not ${names}`)
}

/**
 * Why a whole form is refused, once it has been read: a required file that did not come (`file`
 * is the field the first file came in), then a required text field missing or blank, or one
 * longer than its limit. Undefined: the form is as declared.
 */
export function formRefused(
  form: FormSpec,
  file: string | undefined,
  fields: Readonly<Record<string, string>>,
): ValidationFailed | undefined {
  for (const [name, part] of Object.entries(form))
    if (part.kind === "file" && part.required && file !== name)
      return refused(name, `is required: a file (${part.mediaTypes.join(", ")}) in form field "${name}"`)
  for (const [name, part] of Object.entries(form)) {
    if (part.kind !== "text") continue
    const value = Object.hasOwn(fields, name) ? fields[name] : undefined
    if (part.required && (value === undefined || value.trim() === "")) return refused(name, "is required")
    if (value !== undefined && part.maxLength !== undefined && value.length > part.maxLength)
      return refused(name, `must be at most ${part.maxLength} characters`)
  }
  return undefined
}

/** A CSV file part (audience, do-not-call and data-source uploads); its type header is not checked. */
export const csvFile = (description: string): FilePart => ({
  kind: "file",
  mediaTypes: ["text/csv"],
  required: true,
  description,
})
