// What a handler answers with: a JSON body, bytes of a known type, or a stream written as it is
// produced (SSE, PDF, downloads). The server writes each kind through the same uWS layer.

export interface StreamWriter {
  /**
   * Queues a chunk. Resolves true once all of it was handed to the socket (immediately when it is
   * not backed up), false when the client is gone; a writer that awaits each call holds at most
   * its one chunk beyond what the socket takes, and the server's own buffer at most one slice of it.
   */
  write(chunk: string | Uint8Array): Promise<boolean>
  /**
   * Bytes queued and not yet handed to the socket, plus those handed over since it last took a
   * write whole: an upper bound on what the server holds for this client (0 when it keeps up).
   */
  bufferedBytes(): number
  readonly closed: boolean
  /** Called once when the stream ends: client gone, end() called, or server shutting down. */
  onClose(cb: () => void): void
  end(): void
}

export type Headers = Readonly<Record<string, string>>

export type Reply =
  | { readonly kind: "json"; readonly status: number; readonly body: unknown; readonly headers?: Headers }
  | {
      readonly kind: "bytes"
      readonly status: number
      readonly contentType: string
      readonly body: Uint8Array | string
      readonly headers?: Headers
      /**
       * For a `cached` route: how long the answer stays true as time passes alone (it shows a
       * deadline, such as a hold's end); absent: until its data changes.
       */
      readonly freshForMs?: number
    }
  | {
      readonly kind: "stream"
      readonly status: number
      readonly contentType: string
      readonly headers?: Headers
      /** Runs after the status and headers are sent; the stream ends when it settles (or earlier). */
      readonly run: (writer: StreamWriter) => Promise<void>
    }

export const json = (body: unknown, status = 200, headers?: Headers): Reply => ({
  kind: "json",
  status,
  body,
  ...(headers && { headers }),
})

export const bytes = (contentType: string, body: Uint8Array | string, status = 200, headers?: Headers): Reply => ({
  kind: "bytes",
  status,
  contentType,
  body,
  ...(headers && { headers }),
})

export const stream = (
  contentType: string,
  run: (writer: StreamWriter) => Promise<void>,
  status = 200,
  headers?: Headers,
): Reply => ({
  kind: "stream",
  status,
  contentType,
  run,
  ...(headers && { headers }),
})
