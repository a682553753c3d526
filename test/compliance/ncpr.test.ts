// The national registry: preference and number rules, the import of the published file (header
// variants, adds and deletes, skipped rows, batches), --replace that never empties the table
// on failure, and the lookup. The `parley ncpr import` command, a process of its own, is in
// ncpr.process.test.ts.
import { Readable } from "node:stream"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  importNcpr,
  lookupNcpr,
  ncprBlocks,
  normalisePreference,
  parseRegistryDate,
} from "../../src/compliance/ncpr.import.js"
import { CsvFormatError } from "../../src/phones/csv.js"
import { indianE164 } from "../../src/phones/phone.js"
import { startTestServer, type TestServer } from "../support/harness.js"

const india = (i: number) => `+9198${String(10_000_000 + i)}`
const national = (i: number) => india(i).slice(3)

describe("rules", () => {
  it("normalises preferences", () => {
    expect(normalisePreference("0")).toBe("0")
    expect(normalisePreference("5#1#2")).toBe("1,2,5")
    expect(normalisePreference("1,2,5")).toBe("1,2,5")
    expect(normalisePreference(" 2|1 | 2 ")).toBe("1,2")
    expect(normalisePreference("3;7 8")).toBe("3,7,8")
    expect(normalisePreference("0#3")).toBe("0")
    expect(normalisePreference("")).toBe("0")
    expect(normalisePreference(undefined)).toBe("0")
    expect(normalisePreference("all")).toBeUndefined()
    expect(normalisePreference("1,x")).toBeUndefined()
  })

  it("decides whether a registration blocks a category", () => {
    expect(ncprBlocks("0", 3)).toBe(true)
    expect(ncprBlocks("1,2,5", 2)).toBe(false)
    expect(ncprBlocks("1,2,5", "5")).toBe(false)
    expect(ncprBlocks("1,2,5", 3)).toBe(true)
    expect(ncprBlocks("1,2,5", null)).toBe(true)
  })

  it("reads Indian numbers only", () => {
    expect(indianE164("9810000001")).toBe("+919810000001")
    expect(indianE164("09810000001")).toBe("+919810000001")
    expect(indianE164("919810000001")).toBe("+919810000001")
    expect(indianE164("+91 98100-00001")).toBe("+919810000001")
    expect(indianE164("00919810000001")).toBe("+919810000001")
    expect(indianE164("9198100000")).toBe("+919198100000") // ten digits: national, not a prefix
    expect(indianE164("+14152000001")).toBeUndefined()
    expect(indianE164("12345")).toBeUndefined()
    expect(indianE164("0123456789")).toBeUndefined()
    expect(indianE164("abc")).toBeUndefined()
  })

  it("reads the registry's date formats", () => {
    expect(parseRegistryDate("2024-01-31")?.toISOString()).toBe("2024-01-31T00:00:00.000Z")
    expect(parseRegistryDate("31-01-2024")?.toISOString()).toBe("2024-01-31T00:00:00.000Z")
    expect(parseRegistryDate("31/01/2024 10:20")?.toISOString()).toBe("2024-01-31T10:20:00.000Z")
    expect(parseRegistryDate("20240131")?.toISOString()).toBe("2024-01-31T00:00:00.000Z")
    expect(parseRegistryDate("31-02-2024")).toBeNull()
    expect(parseRegistryDate("soon")).toBeNull()
  })
})

describe("import", () => {
  let srv: TestServer
  beforeAll(async () => {
    srv = await startTestServer()
  })
  afterAll(async () => srv?.stop())

  const file = (text: string) => Readable.from([Buffer.from(text)])
  const registry = async () =>
    (
      await srv.sql<Array<{ phone_e164: string; preference: string; registered_at: Date | null }>>`
      select phone_e164, preference, registered_at from ncpr_registry order by phone_e164`
    ).map((r) => ({ ...r, registered_at: r.registered_at?.toISOString() ?? null }))

  it("imports a file with a header: adds, modifications and deletes in file order; others skipped", async () => {
    await srv.sql`delete from ncpr_registry`
    await srv.sql`insert into ncpr_registry (phone_e164, preference) values (${india(2)}, '0')`
    const csv =
      "\uFEFFService Area,Phone Number,Preference,OpType,Date\n" +
      `DL,${national(1)},0,A,2024-01-31\n` +
      `MH,${national(2)},1#2#5,A,31-01-2024\n` +
      `KA,91${national(3)},"3,4",A,\n` +
      `KA,+1 415 200 0001,0,A,\n` + // not Indian
      `KA,${national(4)},all,A,\n` + // unreadable preference
      `KA,${national(5)},0,X,\n` + // unknown operation
      `KA,${national(3)},7,M,\n` + // modification: 3 now accepts 7 only
      `KA,${national(2)},,D,\n`
    expect(await importNcpr(srv.sql, file(csv))).toEqual({ imported: 4, deleted: 1, skipped: 3 })
    expect(await registry()).toEqual([
      { phone_e164: india(1), preference: "0", registered_at: "2024-01-31T00:00:00.000Z" },
      { phone_e164: india(3), preference: "7", registered_at: null },
    ])
  })

  it("imports a file without a header (number, preference[, op[, date]]) and other header names", async () => {
    await srv.sql`delete from ncpr_registry`
    expect(await importNcpr(srv.sql, file(`${national(10)},0\n0${national(11)},2|6,A\n${national(12)},,A\n`))).toEqual({
      imported: 3,
      deleted: 0,
      skipped: 0,
    })
    expect(await importNcpr(srv.sql, file(`msisdn,pref\n${india(13)},1\n`))).toEqual({
      imported: 1,
      deleted: 0,
      skipped: 0,
    })
    expect((await registry()).map((r) => [r.phone_e164, r.preference])).toEqual([
      [india(10), "0"],
      [india(11), "2,6"],
      [india(12), "0"],
      [india(13), "1"],
    ])
    await expect(importNcpr(srv.sql, file("circle,status\nDL,active\n"))).rejects.toBeInstanceOf(CsvFormatError)
  })

  it("streams a large file in batches", async () => {
    await srv.sql`delete from ncpr_registry`
    async function* big(): AsyncGenerator<string> {
      yield "number,preference\n"
      for (let i = 0; i < 5000; i += 500) {
        const line = (j: number) => `${national(i + j)},${(i + j) % 3 === 0 ? "0" : "1#2"}`
        yield `${Array.from({ length: 500 }, (_, j) => line(j)).join("\n")}\n`
      }
    }
    expect(await importNcpr(srv.sql, big())).toEqual({ imported: 5000, deleted: 0, skipped: 0 })
    const [{ n }] = await srv.sql<[{ n: number }]>`select count(*)::int as n from ncpr_registry`
    expect(n).toBe(5000)
  })

  it("--replace makes the table the file, and a failed replace leaves every old registration", async () => {
    await srv.sql`delete from ncpr_registry`
    await importNcpr(srv.sql, file(`${national(1)},0\n${national(2)},0\n${national(3)},0\n`))
    async function* failing(): AsyncGenerator<string> {
      yield `${national(3)},1\n${national(4)},0\n`
      throw new Error("the download broke")
    }
    await expect(importNcpr(srv.sql, failing(), { replace: true })).rejects.toThrow("the download broke")
    expect((await registry()).map((r) => r.phone_e164)).toEqual([india(1), india(2), india(3)])

    expect(await importNcpr(srv.sql, file(`${national(3)},1\n${national(4)},0\n`), { replace: true })).toEqual({
      imported: 2,
      deleted: 2,
      skipped: 0,
    })
    expect((await registry()).map((r) => [r.phone_e164, r.preference])).toEqual([
      [india(3), "1"],
      [india(4), "0"],
    ])
  })

  it("looks a number up", async () => {
    await srv.sql`delete from ncpr_registry`
    await importNcpr(srv.sql, file(`${national(7)},2#3,A,2023-05-06\n`))
    expect(await lookupNcpr(srv.sql, india(7))).toEqual({
      phone_e164: india(7),
      preference: "2,3",
      registered_at: new Date("2023-05-06T00:00:00Z"),
    })
    expect(await lookupNcpr(srv.sql, india(8))).toBeUndefined()
    expect(await lookupNcpr(srv.sql, "+14152000001")).toBeUndefined()
  })
})
