// The uWS request/response plumbing: reading a bounded body, writing corked replies, and streams
// that honour backpressure. uWS objects are only valid on the thread of the request and until
// the response ends or aborts, so every write goes through these guards.
import { STATUS_CODES } from "node:http"
import type { Headers, StreamWriter } from "./reply.js"
import type { HttpResponse } from "./uws.js"

/** Per-request state shared by the reader, the writers and the abort handler. */
export class Exchange {
  aborted = false
  /** A reply (or a stream's headers) has been written; no second status line may follow. */
  started = false
  finished = false
  status = 0
  bytesOut = 0
  /** Body bytes uWS has handed over so far (the access log's bytes_in). */
  bytesIn = 0
  /** The matched route's template, for the request metrics; undefined when no route matched. */
  route: string | undefined = undefined
  private abortHandlers: Array<() => void> = []
  /** Reasons the body is paused (the caller not yet authenticated, a reader that is behind). */
  private holds = 0

  constructor(readonly res: HttpResponse) {
    res.onAborted(() => {
      this.aborted = true
      this.finished = true
      const handlers = this.abortHandlers
      this.abortHandlers = []
      for (const h of handlers) h()
    })
  }

  onAbort(cb: () => void): void {
    if (this.aborted) cb()
    else this.abortHandlers.push(cb)
  }

  get writable(): boolean {
    return !this.aborted && !this.finished
  }

  /** Takes the body as uWS hands it over, counting it; one reader per request (a uWS rule). */
  onData(cb: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    this.res.onData((chunk, isLast) => {
      this.bytesIn += chunk.byteLength
      cb(chunk, isLast)
    })
  }

  /**
   * Stops uWS reading the body until every hold is released. What came in the same read as the
   * headers still reaches onData, so a held request costs at most one socket read of memory.
   */
  hold(): void {
    if (this.holds++ === 0 && this.writable) this.res.pause()
  }

  /** Releases one hold. The response object is dead once ended, so it is left alone then. */
  release(): void {
    if (this.holds === 0) return
    if (--this.holds === 0 && this.writable) this.res.resume()
  }
}

export class BodyTooLarge extends Error {}
export class ClientGone extends Error {}

/**
 * Reads the body (must be called synchronously inside the uWS handler). Rejects BodyTooLarge as
 * soon as more than `limit` bytes arrive, ClientGone if the client aborts. Each byte is copied
 * once out of uWS's memory: into one buffer of the declared length when there is one, otherwise
 * into chunks joined once at the end (a chunked body).
 */
export function readBody(ex: Exchange, limit: number, declared?: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    // Made on the first chunk, not before: a client that declares a length and sends nothing costs nothing.
    let whole: Buffer | undefined
    const sized = declared !== undefined && declared > 0 && declared <= limit
    let size = 0
    let settled = false
    ex.onAbort(() => {
      if (!settled) {
        settled = true
        reject(new ClientGone())
      }
    })
    ex.onData((chunk, isLast) => {
      if (settled) return
      const n = chunk.byteLength
      if (size + n > limit || (sized && size + n > declared)) {
        settled = true
        reject(new BodyTooLarge())
        return
      }
      // uWS reuses the chunk's memory once this callback returns: copy it now, exactly once.
      if (n > 0) {
        if (sized) (whole ??= Buffer.allocUnsafe(declared)).set(new Uint8Array(chunk), size)
        else chunks.push(Buffer.from(chunk.slice(0)))
      }
      size += n
      if (isLast) {
        settled = true
        if (whole !== undefined) resolve(size === whole.length ? whole : whole.subarray(0, size))
        else
          resolve(
            chunks.length === 0 ? Buffer.alloc(0) : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size),
          )
      }
    })
  })
}

const statusLines = new Map<number, string>()
export function statusLine(status: number): string {
  let line = statusLines.get(status)
  if (!line) statusLines.set(status, (line = `${status} ${STATUS_CODES[status] ?? "Unknown"}`))
  return line
}

function writeHead(
  res: HttpResponse,
  status: number,
  contentType: string,
  headers: Headers | undefined,
  common: Headers,
): void {
  res.writeStatus(statusLine(status))
  res.writeHeader("Content-Type", contentType)
  for (const k in common) res.writeHeader(k, common[k]!)
  if (headers) for (const k in headers) res.writeHeader(k, headers[k]!)
}

/** Writes a whole reply in one corked batch. `head` true: headers only (HEAD requests). */
export function sendWhole(
  ex: Exchange,
  status: number,
  contentType: string,
  body: string | Uint8Array,
  headers: Headers | undefined,
  common: Headers,
  opts: { head: boolean; closeConnection: boolean },
): void {
  if (!ex.writable || ex.started) return
  ex.started = true
  ex.finished = true
  ex.status = status
  const length = typeof body === "string" ? Buffer.byteLength(body) : body.byteLength
  ex.bytesOut = opts.head ? 0 : length
  ex.res.cork(() => {
    writeHead(ex.res, status, contentType, headers, common)
    if (opts.head) ex.res.endWithoutBody(length, opts.closeConnection)
    else ex.res.end(body, opts.closeConnection)
  })
}

/** A stream writer as the server holds it. */
export interface OpenStream extends StreamWriter {
  /**
   * Settles once res.end() was called or the client is gone. After end() this waits for a client
   * that is behind to read (see end()), or for its connection to go.
   */
  readonly finished: Promise<void>
  /**
   * Ends the response as broken: the connection is closed without the terminating chunk, so the
   * client sees an incomplete body (curl: "transfer closed with outstanding read data") rather than a
   * download that looks whole. For a producer that failed half-way.
   */
  abort(): void
}

/**
 * The most a single res.write hands uWS (bytes of a byte chunk; UTF-16 units of a string). uWS keeps
 * whatever the socket does not take of a write in its own buffer, so a producer's large chunk (a CSV
 * page of several MB) is cut into slices and the ones not yet given to uWS wait here, where
 * bufferedBytes() can count them.
 */
export const STREAM_SLICE_BYTES = 64 * 1024
/** A string is cut every this many UTF-16 units: at most 64 KiB of UTF-8 for ASCII, 192 KiB at worst. */
const STREAM_SLICE_UNITS = STREAM_SLICE_BYTES
const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff

/** Sends status and headers, then hands back a writer for a body of unknown length (chunked). */
export function openStream(
  ex: Exchange,
  status: number,
  contentType: string,
  headers: Headers | undefined,
  common: Headers,
): OpenStream {
  ex.started = true
  ex.status = status
  const res = ex.res
  const closeHandlers: Array<() => void> = []
  let closed = false
  // The producer's bytes not yet handed to uWS, in order, in slices (STREAM_SLICE_BYTES) with their
  // sizes in bytes (`first` is the next to go: the arrays are cleared once drained, never shifted).
  let slices: Array<string | Uint8Array> = []
  let sizes: number[] = []
  let first = 0
  let pendingBytes = 0
  // uWS holds bytes the socket has not taken: the last res.write returned false.
  let blocked = false
  // Bytes handed to uWS since a write last went out whole. uWS reports no buffered amount for chunked
  // bodies (getWriteOffset stays 0), so this upper bound stands in for what it holds.
  let backlog = 0
  // Producers waiting for the slices to be handed over.
  let waiters: Array<(ok: boolean) => void> = []
  // end() was called while bytes were still ours or uWS's: res.end() waits for onWritable (see end()).
  let ending = false
  let settle!: () => void
  const finished = new Promise<void>((r) => (settle = r))
  const finish = () => {
    if (ex.writable) {
      ex.finished = true
      res.cork(() => res.end())
    }
    settle()
  }

  const release = (ok: boolean) => {
    const w = waiters
    waiters = []
    for (const resolve of w) resolve(ok)
  }

  const queue = (slice: string | Uint8Array, n: number) => {
    slices.push(slice)
    sizes.push(n)
    pendingBytes += n
    ex.bytesOut += n
  }

  const drop = () => {
    slices = []
    sizes = []
    first = 0
    pendingBytes = 0
  }

  const close = () => {
    if (closed) return
    closed = true
    release(false)
    for (const h of closeHandlers.splice(0)) h()
  }

  /**
   * Hands slices to uWS while it takes them whole; stops at the first it only buffered. Each slice is
   * its own corked write, so its chunk header goes out with its bytes.
   */
  const pump = () => {
    while (first < slices.length && ex.writable) {
      const slice = slices[first]!
      const n = sizes[first]!
      slices[first++] = ""
      pendingBytes -= n
      let ok = true
      res.cork(() => {
        ok = res.write(slice)
      })
      backlog = ok ? 0 : backlog + n
      blocked = !ok
      if (!ok) break
    }
    if (first === slices.length) {
      slices = []
      sizes = []
      first = 0
    }
  }

  ex.onAbort(() => {
    drop()
    close()
    settle()
  })
  res.cork(() => writeHead(res, status, contentType, headers, common))
  // uWS calls this when the socket can take more, but with a handler set it does not send
  // what it buffered itself: only a write made inside the handler does. So the next slices are
  // written here, and the producer is released once none is left.
  res.onWritable(() => {
    if (!ex.writable) return true
    if (first < slices.length) {
      pump()
      if (first === slices.length) {
        // Ending: res.end() once uWS took the last slice whole; otherwise at the next writable event.
        if (ending && !blocked) finish()
        else release(true)
      }
    } else if (ending) {
      // res.end() pushes what uWS holds and the terminating chunk into the kernel (see end()).
      finish()
    } else {
      // Nothing of ours waits, but uWS may hold the tail of the last slice: an empty corked write
      // makes it send what it buffered (uncorking writes the socket's buffer first).
      res.cork(() => {})
      blocked = false
      release(true)
    }
    return true
  })

  const writer: OpenStream = {
    get closed() {
      return closed
    },
    write(chunk) {
      if (closed || !ex.writable) return Promise.resolve(false)
      if (typeof chunk === "string") {
        // Cut by UTF-16 units, never inside a surrogate pair (uWS encodes each slice on its own): no
        // copy of the whole string is made here.
        for (let at = 0; at < chunk.length; ) {
          let end = Math.min(at + STREAM_SLICE_UNITS, chunk.length)
          if (end < chunk.length && isHighSurrogate(chunk.charCodeAt(end - 1))) end--
          const slice = at === 0 && end === chunk.length ? chunk : chunk.slice(at, end)
          queue(slice, Buffer.byteLength(slice))
          at = end
        }
      } else
        for (let at = 0; at < chunk.byteLength; at += STREAM_SLICE_BYTES) {
          const slice = chunk.subarray(at, Math.min(at + STREAM_SLICE_BYTES, chunk.byteLength))
          queue(slice, slice.byteLength)
        }
      // Behind the socket: the slices wait for onWritable, in order behind the ones already waiting.
      if (!blocked) pump()
      if (first === slices.length) return Promise.resolve(true)
      return new Promise<boolean>((resolve) => waiters.push(resolve))
    },
    bufferedBytes() {
      return closed ? 0 : pendingBytes + backlog
    },
    onClose(cb) {
      if (closed) cb()
      else closeHandlers.push(cb)
    },
    end() {
      if (closed) return
      // Slices still here, or bytes uWS holds that the socket has not taken. res.end() now would
      // queue the terminating chunk behind them, and uWS would send both as the client reads, but
      // nothing would tell us when: after end() the response object is dead, onWritable and
      // onAborted no longer fire (not even with end(body, true), which on a chunked body also
      // writes a stray "Connection: close" line into it) and getWriteOffset stays 0 for chunked
      // bodies. app.close() at shutdown would then drop them. So the response stays ours until
      // every slice is handed over and uWS reports the socket writable again: res.end() in
      // onWritable pushes the held bytes and the terminating chunk into the kernel, which still
      // delivers them after the socket is closed. (Should the kernel take only part, uWS sends the
      // rest as the client reads.) `finished` tells the server when res.end() happened; the
      // producer is released now.
      if ((first < slices.length || blocked) && ex.writable) ending = true
      else finish()
      close()
    },
    abort() {
      drop()
      if (ex.writable) {
        ex.finished = true
        res.close()
      }
      close()
      settle()
    },
    finished,
  }
  return writer
}
