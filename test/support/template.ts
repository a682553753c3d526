// What the global setup hands each test worker: the migrated template every test database is
// copied from, and the scratch directory their data directories go in (both removed at the end).

export type Template =
  /** `dataDir`: the migrated cluster's; `empty`: a cluster initdb made, never migrated. */
  { kind: "pglite"; dataDir: string; empty: string } | { kind: "postgres"; database: string; url: string }

declare module "vitest" {
  export interface ProvidedContext {
    template: Template
    scratch: string
  }
}

/** The name every copy of the Postgres template `template` starts with: the teardown drops them all. */
export const copyPrefix = (template: string): string => `${template.replace("_tpl_", "_t_")}_`
