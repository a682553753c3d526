// Where the project's own files live (migrations, assets), found from this module so the same
// code works from src/ under vitest/tsx and from dist/src/ after a build.
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

function findRoot(start: string): string {
  let dir = start
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir)
    if (up === dir) throw new Error(`package.json not found above ${start}`)
    dir = up
  }
  return dir
}

export const PROJECT_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)))
export const MIGRATIONS_DIR = join(PROJECT_ROOT, "migrations")
