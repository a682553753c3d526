// Mends a crash in the postgres driver (postgres.js 3.4.9, unfixed upstream: porsager/postgres#1154,
// #1208, PRs #1168 and #1209). A query shorter than 1 KiB is written on the next turn of the loop
// (setImmediate); when the connection closes first, the write dereferences a socket that is gone and
// throws where nothing can catch it, taking the whole process down. And the teardown cancels that
// write without forgetting it, so a pooled connection that reconnects never flushes a short query
// again. Run after every install (the package's `postinstall`); it changes only the lines below, is
// idempotent, and refuses loudly when the driver's code is not the one it knows.
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const pkg = join(root, "node_modules", "postgres")
const MARK = "/* parley: closed-socket guard */"

const edits = [
  {
    // The deferred write settles its queries with CONNECTION_CLOSED instead of throwing.
    from: "  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)",
    to:
      `  function nextWrite(fn) {\n    ${MARK}\n    if (socket === null) {\n` +
      "      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n" +
      "      chunk = nextWriteTimer = null\n" +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n" +
      "      return false\n    }\n    const x = socket.write(chunk, fn)",
  },
  {
    // terminate() and closed() forget the cancelled write, so the next one is scheduled again.
    from: "    clearImmediate(nextWriteTimer)\n    if (socket) {",
    to: "    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    if (socket) {",
  },
  {
    from: "    clearImmediate(nextWriteTimer)\n    socket.removeListener('data', data)",
    to:
      "    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n" +
      "    socket.removeListener('data', data)",
  },
]

if (!existsSync(pkg)) process.exit(0) // installed without the driver (nothing to mend)
const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"))
for (const dir of ["src", "cjs/src", "cf/src"]) {
  const file = join(pkg, dir, "connection.js")
  if (!existsSync(file)) continue
  let text = readFileSync(file, "utf8")
  if (text.includes(MARK)) continue
  for (const { from, to } of edits) {
    if (text.split(from).length !== 2) {
      process.stderr.write(
        `patch-postgres: postgres@${version} ${dir}/connection.js is not the code this patch mends; ` +
          "check whether the new version fixes the closed-socket write (porsager/postgres#1208) and " +
          "update or remove scripts/patch-postgres.mjs\n",
      )
      process.exit(1)
    }
    text = text.replace(from, to)
  }
  writeFileSync(file, text)
}
