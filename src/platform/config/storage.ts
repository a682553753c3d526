// Where state lives and how processes reach each other: Postgres (or PGlite embedded in DATA_DIR)
// and NATS (or the in-process bus), with the embedded database's memory settings.
import { z } from "zod"
import { DEFAULT_PGLITE_SHARED_BUFFERS, pgMemoryBytes, WASM_TIER_UP, type WasmTierUp } from "../pglite.options.js"
import { optionalString, type Parsed, positiveInt } from "./fields.js"

export const storageEnv = {
  /** Postgres connection string; unset → embedded PGlite in DATA_DIR. */
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL")
      .optional(),
  ),
  DB_POOL_MAX: positiveInt.max(200).default(10),
  /** Longest one SQL statement may run before Postgres cancels it. */
  DB_STATEMENT_TIMEOUT_MS: positiveInt.max(3_600_000).default(30_000),
  /** NATS server(s), comma-separated; unset → in-process bus. */
  NATS_URL: optionalString.pipe(
    z
      .string()
      .regex(/^(nats|tls|ws|wss):\/\//, "must be a nats:// URL")
      .optional(),
  ),
  /** Prefix for every bus subject of this deployment (share one NATS between deployments). */
  BUS_NAMESPACE: z
    .string()
    .regex(/^([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)?$/, "must be dot-separated tokens of letters, digits, _ and -")
    .default(""),
  DATA_DIR: z.string().min(1).default("./data"),
  /** The embedded database's shared_buffers (128kB–1GB), all of it resident from start; PGlite's own is 128MB. */
  PGLITE_SHARED_BUFFERS: z
    .string()
    .trim()
    .refine((s) => {
      const bytes = pgMemoryBytes(s)
      return bytes !== undefined && bytes >= 128 * 1024 && bytes <= 1024 ** 3
    }, "must be a size from 128kB to 1GB, such as 16MB")
    .default(DEFAULT_PGLITE_SHARED_BUFFERS),
  /** How V8 compiles the embedded database's WASM: hot (default), off (least memory, slower SQL), v8. */
  PGLITE_WASM_TIER_UP: z.enum(WASM_TIER_UP, { error: 'must be "hot", "off" or "v8"' }).default("hot"),
}
export type StorageEnv = Parsed<typeof storageEnv>

export type StorageConfig = Readonly<{
  databaseUrl: string | undefined
  dbPoolMax: number
  dbStatementTimeoutMs: number
  natsUrl: string | undefined
  busNamespace: string
  dataDir: string
  /** The embedded database's memory settings (PGLITE_*). */
  pglite: { sharedBuffers: string; wasmTierUp: WasmTierUp }
}>

export function storageConfig(e: StorageEnv): StorageConfig {
  return {
    databaseUrl: e.DATABASE_URL,
    dbPoolMax: e.DB_POOL_MAX,
    dbStatementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS,
    natsUrl: e.NATS_URL,
    busNamespace: e.BUS_NAMESPACE,
    dataDir: e.DATA_DIR,
    pglite: { sharedBuffers: e.PGLITE_SHARED_BUFFERS, wasmTierUp: e.PGLITE_WASM_TIER_UP },
  }
}
