// Where call recordings are kept (RECORDING_STORE): in the database itself (pg, the default) or in
// an S3-compatible bucket reached path-style with AWS Signature V4 (s3, which needs all its S3_*).
import { z } from "zod"
import { optionalString, type Parsed } from "./fields.js"

export const recordingsEnv = {
  /** pg: recordings as chunks in Postgres (the default); s3: in S3_BUCKET at S3_ENDPOINT. */
  RECORDING_STORE: optionalString.pipe(z.enum(["pg", "s3"], { error: 'must be "pg" or "s3"' }).default("pg")),
  /** The S3 API's root, e.g. https://s3.eu-west-1.amazonaws.com or http://127.0.0.1:9000 (objects: path-style). */
  S3_ENDPOINT: optionalString.pipe(z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).optional()),
  S3_BUCKET: optionalString.pipe(
    z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, "must be an S3 bucket name (3–63 of a-z, 0-9, . and -)")
      .optional(),
  ),
  S3_REGION: optionalString.pipe(z.string().default("us-east-1")),
  S3_ACCESS_KEY_ID: optionalString,
  S3_SECRET_ACCESS_KEY: optionalString,
}
export type RecordingsEnv = Parsed<typeof recordingsEnv>

/** The bucket recordings go to when RECORDING_STORE=s3. */
export type S3Settings = Readonly<{
  endpoint: string
  bucket: string
  region: string
  accessKeyId: string
  secretAccessKey: string
}>

export type RecordingsConfig = Readonly<{
  recordingStore: "pg" | "s3"
  /** Set exactly when recordingStore is "s3" (config.ts refuses s3 without every setting). */
  s3: S3Settings | undefined
}>

/** The S3 variables RECORDING_STORE=s3 cannot go without, of those left unset. */
export function missingS3Settings(e: RecordingsEnv): string[] {
  if (e.RECORDING_STORE !== "s3") return []
  const needed = {
    S3_ENDPOINT: e.S3_ENDPOINT,
    S3_BUCKET: e.S3_BUCKET,
    S3_ACCESS_KEY_ID: e.S3_ACCESS_KEY_ID,
    S3_SECRET_ACCESS_KEY: e.S3_SECRET_ACCESS_KEY,
  }
  return Object.entries(needed)
    .filter(([, v]) => v === undefined)
    .map(([k]) => k)
}

export function recordingsConfig(e: RecordingsEnv): RecordingsConfig {
  const s3 =
    e.RECORDING_STORE === "s3" && missingS3Settings(e).length === 0
      ? {
          endpoint: e.S3_ENDPOINT!.replace(/\/+$/, ""),
          bucket: e.S3_BUCKET!,
          region: e.S3_REGION,
          accessKeyId: e.S3_ACCESS_KEY_ID!,
          secretAccessKey: e.S3_SECRET_ACCESS_KEY!,
        }
      : undefined
  return { recordingStore: e.RECORDING_STORE, s3 }
}
