// Plain-text helpers the simulator's answers are made with: the content words of a text and a
// clip at a word boundary. The simulator's rule-book writer (src/workflows/) uses the same ones,
// so a handler's trigger and what a callee says are compared word for word alike.

const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    "the and for from with about this that these those your you our they them their it's its i'm don't can't " +
    "call calls calling called customer customers again right now get can will would should could into " +
    "before after more than then there here what when who how why are was were has have had not but all any"
  ).split(" "),
)

/** The lower-cased content words of `text`: three letters or more, stop words left out. */
export function wordsOf(text: string): Set<string> {
  return new Set((text.toLowerCase().match(/[a-z]+/g) ?? []).filter((w) => w.length >= 3 && !STOP_WORDS.has(w)))
}

/** `text` cut to at most `max` characters at a word boundary. */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text
  const cut = text.slice(0, max + 1)
  const space = cut.lastIndexOf(" ")
  return (space > max / 2 ? cut.slice(0, space) : text.slice(0, max)).replace(/[\s,;:–—-]+$/, "")
}
