// The zod pieces the concern files share: numbers as the environment spells them, blanks read as
// unset, and the base64 key check (also used where a key arrives other than by the environment).
import { z } from "zod"

/**
 * true when `text` is exactly `bytes` bytes of canonical base64 (surrounding blanks ignored).
 * Buffer.from skips characters that are not base64: re-encoding catches a mangled key.
 */
export function isBase64Key(text: string, bytes: number): boolean {
  const s = text.trim()
  const key = Buffer.from(s, "base64")
  return key.length === bytes && key.toString("base64").replace(/=+$/, "") === s.replace(/=+$/, "")
}

export const port = z.coerce.number().int().min(0).max(65535)
export const positiveInt = z.coerce.number().int().positive()
export const nonNegativeInt = z.coerce.number().int().min(0)
// Shells and compose files often leave a variable empty: that means unset.
export const optionalString = z
  .string()
  .transform((s) => s.trim())
  .pipe(z.string())
  .optional()
  .transform((s) => (s === undefined || s === "" ? undefined : s))

/** "true" or "false", default false. */
export const flag = z
  .enum(["true", "false"])
  .default("false")
  .transform((v) => v === "true")

/** A comma-separated list, each item trimmed (and changed by `each`), blanks dropped. */
export const commaList = (each: (item: string) => string = (x) => x) =>
  z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((x) => each(x.trim()))
        .filter((x) => x !== ""),
    )

/** What zod makes of one concern's variables. */
export type Parsed<Shape extends z.ZodRawShape> = z.output<z.ZodObject<Shape>>
