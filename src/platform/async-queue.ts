// Values handed from a producer to one consumer that reads them with for await: push() never
// waits (the producer is bounded by what it makes: a reply's sentences), close() ends the reading.

export class Queue<T> implements AsyncIterable<T> {
  private readonly items: T[] = []
  private closed = false
  private wake: (() => void) | undefined

  push(item: T): void {
    if (this.closed) return
    this.items.push(item)
    this.wake?.()
  }

  /** No more values: the reader finishes once it has read those pushed. */
  close(): void {
    this.closed = true
    this.wake?.()
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const next = this.items.shift()
      if (next !== undefined) {
        yield next
        continue
      }
      if (this.closed) return
      await new Promise<void>((resolve) => {
        this.wake = resolve
      })
      this.wake = undefined
    }
  }
}
