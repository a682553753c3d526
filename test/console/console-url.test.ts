// The console URL the server prints at start-up (src/main/main.ts): PUBLIC_BASE_URL's /console with
// no doubled slash, else the listening address as a browser takes it (IPv6 in brackets).
import { describe, expect, it } from "vitest"
import { consoleUrl } from "../../api/console/console-url.js"

const at = (host: string, publicBaseUrl?: string) => consoleUrl({ host, port: 8080, publicBaseUrl })

describe("the printed console URL", () => {
  it("is PUBLIC_BASE_URL's /console, whether or not the base ends in a slash", () => {
    expect(at("0.0.0.0", "https://parley.example.com")).toBe("https://parley.example.com/console")
    expect(at("0.0.0.0", "https://parley.example.com/")).toBe("https://parley.example.com/console")
    expect(at("0.0.0.0", "https://example.com/parley//")).toBe("https://example.com/parley/console")
    expect(at("::1", "http://localhost:9000/")).toBe("http://localhost:9000/console")
  })

  it("names localhost for a wildcard address", () => {
    for (const host of ["0.0.0.0", "::", "[::]", ""]) expect(at(host), host).toBe("http://localhost:8080/console")
  })

  it("puts an IPv6 address in brackets, and a zone id as %25", () => {
    expect(at("::1")).toBe("http://[::1]:8080/console")
    expect(at("2001:db8::5")).toBe("http://[2001:db8::5]:8080/console")
    expect(at("[::1]")).toBe("http://[::1]:8080/console")
    expect(at("fe80::1%eth0")).toBe("http://[fe80::1%25eth0]:8080/console")
    expect(new URL(at("::1")).hostname).toBe("[::1]")
  })

  it("keeps an IPv4 address or a name as it is", () => {
    expect(at("127.0.0.1")).toBe("http://127.0.0.1:8080/console")
    expect(at("parley.internal")).toBe("http://parley.internal:8080/console")
  })
})
