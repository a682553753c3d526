// A run's knowledge-base rules in the runtime (runtime/actors/run-rules.ts), against a scripted database:
// a call waits for a reload in flight, a slow older answer never overwrites a newer one, a failed
// reload keeps the rules the run had (logged) and the next call tries again.
import { describe, expect, it } from "vitest"
import { RunRules } from "../../runtime/actors/run-rules.js"
import type { Sql } from "../../src/platform/Db.js"
import type { AgentRule } from "../../src/providers/llm/llm.interface.js"

const rule = (id: number, body: string): AgentRule => ({
  id,
  bucket: "banned_phrases",
  title: `rule ${id}`,
  body,
  trigger: null,
  priority: 0,
})

/** A stand-in for postgres.js: each query is answered when the test settles it. */
function scriptedSql() {
  const pending: Array<{ params: unknown[]; resolve: (rows: AgentRule[]) => void; reject: (e: Error) => void }> = []
  const sql = ((_strings: TemplateStringsArray, ...params: unknown[]) =>
    new Promise<AgentRule[]>((resolve, reject) => pending.push({ params, resolve, reject }))) as unknown as Sql
  return { sql, pending }
}

function logger() {
  const errors: Array<{ obj: unknown; msg: string }> = []
  const log = { error: (obj: unknown, msg: string) => errors.push({ obj, msg }) }
  return { log: log as never, errors }
}

const tick = () => new Promise((r) => setImmediate(r))

describe("a run's rules", () => {
  it("loads the run's rules for its tenant and workflow, and a call waits for a reload in flight", async () => {
    const { sql, pending } = scriptedSql()
    const { log } = logger()
    const rules = new RunRules(sql, log, { runId: 1, tenantId: 7, workflowId: 9 })
    const started = rules.reload()
    expect(pending).toHaveLength(1)
    expect(pending[0]!.params).toEqual([7, 9])
    pending[0]!.resolve([rule(1, "one")])
    await started
    expect((await rules.current()).map((r) => r.id)).toEqual([1])

    void rules.reload()
    let got: ReadonlyArray<AgentRule> | undefined
    void rules.current().then((r) => (got = r))
    await tick()
    expect(got).toBeUndefined()
    pending[1]!.resolve([rule(1, "one"), rule(2, "two")])
    await tick()
    expect(got?.map((r) => r.id)).toEqual([1, 2])
  })

  it("never lets an older, slower answer overwrite a newer one", async () => {
    const { sql, pending } = scriptedSql()
    const rules = new RunRules(sql, logger().log, { runId: 1, tenantId: 7, workflowId: 9 })
    const older = rules.reload()
    const newer = rules.reload()
    pending[1]!.resolve([rule(2, "newer")])
    await newer
    pending[0]!.resolve([rule(1, "older")])
    await older
    expect((await rules.current()).map((r) => r.id)).toEqual([2])
  })

  it("keeps the old rules when a reload fails, logs it, and tries again at the next call", async () => {
    const { sql, pending } = scriptedSql()
    const { log, errors } = logger()
    const rules = new RunRules(sql, log, { runId: 3, tenantId: 7, workflowId: 9 })
    const first = rules.reload()
    pending[0]!.resolve([rule(1, "one")])
    await first
    const failed = rules.reload()
    pending[1]!.reject(new Error("connection reset"))
    await failed
    expect(errors).toHaveLength(1)
    expect(errors[0]!.obj).toMatchObject({ run_id: 3 })
    // The next call goes on with the rules it had, and a reload is under way.
    expect((await rules.current()).map((r) => r.id)).toEqual([1])
    expect(pending).toHaveLength(3)
    pending[2]!.resolve([rule(5, "five")])
    await tick()
    expect((await rules.current()).map((r) => r.id)).toEqual([5])
    expect(pending).toHaveLength(3)
  })

  it("makes the first call wait for a retry when the run started without its rules", async () => {
    const { sql, pending } = scriptedSql()
    const { log, errors } = logger()
    const rules = new RunRules(sql, log, { runId: 4, tenantId: 7, workflowId: 9 })
    const start = rules.reload()
    pending[0]!.reject(new Error("database starting up"))
    await start
    expect(errors).toHaveLength(1)
    let got: ReadonlyArray<AgentRule> | undefined
    void rules.current().then((r) => (got = r))
    await tick()
    expect(got).toBeUndefined()
    expect(pending).toHaveLength(2)
    pending[1]!.resolve([rule(8, "eight")])
    await tick()
    expect(got?.map((r) => r.id)).toEqual([8])
  })
})
