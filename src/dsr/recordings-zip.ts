// A zip written as it is read: each file's bytes are stored as they are (Opus is compressed
// already), with a CRC and sizes after its data (fflate's ZipPassThrough), so nothing is held but
// the chunk under way — a contact's years of recordings cost a chunk of memory, not their size.
import { Zip, ZipPassThrough } from "fflate"

export interface ZipEntry {
  readonly name: string
  readonly modified: Date
  readonly chunks: AsyncIterable<Uint8Array>
}

/** Where the zip goes: resolves false once the reader is gone (the zip stops there). */
export type ZipSink = (chunk: Uint8Array) => Promise<boolean>

/** Writes `entries` as one zip to `sink`; false if the reader left before its end. */
export async function writeZip(entries: AsyncIterable<ZipEntry>, sink: ZipSink): Promise<boolean> {
  const out: Uint8Array[] = []
  let failed: Error | undefined
  const zip = new Zip((err, chunk) => {
    if (err !== null) failed = err
    else out.push(chunk)
  })
  const drain = async (): Promise<boolean> => {
    if (failed !== undefined) throw failed
    while (out.length > 0) if (!(await sink(out.shift()!))) return false
    return true
  }
  for await (const e of entries) {
    const file = new ZipPassThrough(e.name)
    file.mtime = e.modified
    zip.add(file)
    for await (const chunk of e.chunks) {
      file.push(chunk)
      if (!(await drain())) return false
    }
    file.push(new Uint8Array(0), true)
    if (!(await drain())) return false
  }
  zip.end()
  return drain()
}
