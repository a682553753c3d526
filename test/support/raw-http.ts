// Speaks HTTP/1.1 over a bare socket, for requests fetch will not send: lying Content-Length,
// chunked uploads, garbage, connections dropped half-way.
import { connect, type Socket } from "node:net"

export interface RawResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
  /** The server closed the connection after this response. */
  readonly closed: boolean
}

/** Sends `request` (written in pieces when given an array) and reads one response. */
export function rawRequest(
  port: number,
  request: string | Buffer | Array<string | Buffer>,
  opts: { timeoutMs?: number } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1")
    let data = Buffer.alloc(0)
    let closed = false
    let done = false
    const timer = setTimeout(() => finish(), opts.timeoutMs ?? 3_000)
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      const text = data.toString("latin1")
      const end = text.indexOf("\r\n\r\n")
      if (end < 0)
        return reject(new Error(`no HTTP response (got ${JSON.stringify(text.slice(0, 200))}, closed=${closed})`))
      const [statusLine, ...headerLines] = text.slice(0, end).split("\r\n")
      const headers: Record<string, string> = {}
      for (const l of headerLines) {
        const i = l.indexOf(":")
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim()
      }
      resolve({
        status: Number(statusLine!.split(" ")[1]),
        headers,
        body: data.subarray(Buffer.byteLength(text.slice(0, end + 4), "latin1")).toString("utf8"),
        closed,
      })
    }
    socket.on("data", (d) => {
      data = Buffer.concat([data, d])
      const text = data.toString("latin1")
      const end = text.indexOf("\r\n\r\n")
      const m = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))
      if (end >= 0 && m && data.length >= end + 4 + Number(m[1])) setTimeout(finish, 20)
    })
    socket.on("close", () => {
      closed = true
      finish()
    })
    socket.on("error", () => {})
    socket.on("connect", () => void writeAll(socket, Array.isArray(request) ? request : [request]))
  })
}

async function writeAll(socket: Socket, pieces: Array<string | Buffer>): Promise<void> {
  for (const p of pieces) {
    if (socket.destroyed) return
    socket.write(p)
    await new Promise((r) => setTimeout(r, 5))
  }
}
