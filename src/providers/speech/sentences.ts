// A reply cut into sentences, for speaking it one sentence at a time: the first is synthesised and
// heard while the model still writes the rest. A sentence ends at . ? or ! followed by space; a
// cut waits for that space, so "Mr. Smith" or "3.5" inside a piece is not cut on a piece's edge.

/** Sentences of a whole text. */
export const sentencesOf = (text: string): string[] =>
  text
    .split(/(?<=[.?!])\s+/)
    .map((s) => s.trim())
    .filter((s) => s !== "")

/** The end of a sentence followed by the space that makes it one. */
const BOUNDARY = /[.?!]\s+/g

/** Cuts text that arrives in pieces into sentences as each is complete. */
export class SentenceCutter {
  private pending = ""

  constructor(private readonly onSentence: (sentence: string) => void) {}

  /** A piece of the text: each sentence it completes is handed on. */
  push(piece: string): void {
    this.pending += piece
    let cut = 0
    for (const m of this.pending.matchAll(BOUNDARY)) {
      const sentence = this.pending.slice(cut, m.index + 1).trim()
      cut = m.index + m[0].length
      if (sentence !== "") this.onSentence(sentence)
    }
    if (cut > 0) this.pending = this.pending.slice(cut)
  }

  /** The text is complete: what is left is the last sentence. */
  end(): void {
    const rest = this.pending.trim()
    this.pending = ""
    if (rest !== "") this.onSentence(rest)
  }
}
