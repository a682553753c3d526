// The depth-bounded JSON parse (src/platform/json.ts) on its own: the depth read from the text
// (strings and escapes skipped, the path to the level too deep), JSON.parse's verdict otherwise,
// and the contract's errors the request layer answers with.
import { describe, expect, it } from "vitest"
import { parseJsonRows, RowsFormatError } from "../../src/data/rows.parse.js"
import { BadRequestBody, ValidationFailed } from "../../src/platform/errors.js"
import { jsonBody, MAX_JSON_DEPTH, parseJson, tooDeepAt, tooDeepFailure } from "../../src/platform/json.js"

const arrays = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`

describe("parseJson", () => {
  it("parses JSON up to 64 levels; 65 are refused with the path to the level too deep", () => {
    expect(MAX_JSON_DEPTH).toBe(64)
    const at64 = parseJson(arrays(64))
    expect(at64.ok && JSON.stringify(at64.value)).toBe(arrays(64))
    expect(parseJson(arrays(65))).toEqual({ ok: false, reason: "depth", path: Array(64).fill(0) })
    expect(parseJson('{"a":1,"b":[true,null,"x"]}')).toEqual({ ok: true, value: { a: 1, b: [true, null, "x"] } })
  })

  it("names the path by keys (unescaped) and array indices", () => {
    const text = '{"x":[1,{"y":2},{"q\\"z":{"w":[[]]},"p":0}],"v":{}}'
    expect(tooDeepAt(text, 4)).toEqual(["x", 2, 'q"z', "w"])
    expect(tooDeepAt(text, 5)).toEqual(["x", 2, 'q"z', "w", 0])
    expect(tooDeepAt(text, 6)).toBeUndefined()
    // The key is the one the value is under, not the last string read (a value or an earlier key).
    expect(tooDeepAt('{"a":"s","b":{"c":["d",[1]]}}', 3)).toEqual(["b", "c", 1])
  })

  it("skips brackets inside strings, escaped quotes and escaped backslashes included", () => {
    const text = JSON.stringify(["[[[[{{{{", 'say "[[["', "a\\", '\\"[[[', { "[[[": "]]]" }])
    expect(tooDeepAt(text, 2)).toBeUndefined()
    expect(tooDeepAt(text, 1)).toEqual([4])
    const parsed = parseJson(text, 2)
    expect(parsed.ok && parsed.value).toEqual(JSON.parse(text))
  })

  it("refuses a million unclosed brackets by depth, reading only as far as level 65", () => {
    const r = parseJson("[".repeat(1024 * 1024))
    expect(r).toMatchObject({ ok: false, reason: "depth" })
    expect(!r.ok && r.reason === "depth" && r.path.length).toBe(64)
    const objects = parseJson('{"k":'.repeat(200_000))
    expect(!objects.ok && objects.reason === "depth" && objects.path).toEqual(Array(64).fill("k"))
  })

  it("leaves everything else to JSON.parse: its message for text that is not JSON", () => {
    expect(parseJson("[1,")).toMatchObject({ ok: false, reason: "syntax" })
    expect(parseJson("{'a':1}")).toMatchObject({ ok: false, reason: "syntax" })
    expect(parseJson('"unterminated')).toMatchObject({ ok: false, reason: "syntax" })
    expect(parseJson("]]]}}}")).toMatchObject({ ok: false, reason: "syntax" })
    expect(parseJson('"\\"[[["')).toEqual({ ok: true, value: '"[[[' })
  })

  it("answers a request body too deep with the contract's 422 under its top-level field", () => {
    const body = jsonBody(`{"name":"n","attributes":{"x":${arrays(100)}}}`, "request body")
    expect(body).toBeInstanceOf(ValidationFailed)
    const failure = body as ValidationFailed
    expect(failure.status).toBeUndefined() // 422
    expect(failure.errors).toEqual([
      { field: "attributes", message: "must not nest arrays and objects more than 64 levels deep" },
    ])
    expect(tooDeepFailure([]).errors[0]!.field).toBe("body")
    expect(tooDeepFailure(["k".repeat(1000), 0]).errors[0]!.field).toBe(`${"k".repeat(200)}…`)
    const bad = jsonBody("{", "webhook body")
    expect(bad).toBeInstanceOf(BadRequestBody)
    expect((bad as BadRequestBody).code).toBe("BAD_JSON")
    expect(jsonBody("[1]", "request body")).toEqual({ value: [1] })
  })

  it("bounds a data source's fetched JSON rows too", () => {
    expect(() => parseJsonRows(`[{"a":1},{"b":${arrays(5_000)}}]`)).toThrow(
      new RowsFormatError("row 2 nests arrays and objects more than 64 levels deep"),
    )
    expect(parseJsonRows(`[{"a":${arrays(10)}}]`).rows).toHaveLength(1)
  })
})
