// Shared pieces of the console's pages: buttons, labelled fields, error lines and tables, so every
// page gets labels, focus and error wording the same way.
import type { ButtonHTMLAttributes, ComponentChildren } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { ApiError, describe } from "./api.js"

type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & {
  readonly kind?: "primary" | "secondary" | "danger"
  readonly busy?: boolean
}

/** A real <button>; type defaults to "button" so it never submits a form by accident. */
export function Button({
  kind = "secondary",
  busy = false,
  type = "button",
  disabled,
  children,
  ...rest
}: ButtonProps) {
  return (
    <button {...rest} type={type} class={`btn btn-${kind}`} disabled={disabled || busy} aria-busy={busy}>
      {children}
    </button>
  )
}

let nextId = 0
/** A stable id for label/input pairs. */
export function useId(prefix: string): string {
  const ref = useRef<string | undefined>(undefined)
  if (ref.current === undefined) ref.current = `${prefix}-${++nextId}`
  return ref.current
}

interface FieldProps {
  readonly label: string
  readonly error?: string | undefined
  readonly hint?: string
  /** Renders the control, given the id to put on it and the id of its description. */
  readonly children: (id: string, describedBy: string | undefined) => ComponentChildren
}

/** A label, its control and, under it, a hint or the field's validation error. */
export function Field({ label, error, hint, children }: FieldProps) {
  const id = useId("f")
  const note = error ?? hint
  return (
    <div class={error ? "field field-invalid" : "field"}>
      <label for={id}>{label}</label>
      {children(id, note ? `${id}-note` : undefined)}
      {note && (
        <p id={`${id}-note`} class={error ? "error" : "hint"}>
          {note}
        </p>
      )}
    </div>
  )
}

/**
 * An error from the API (or anything thrown) in words; nothing when there is none, or when it is a
 * refusal of one of `besideFields`, which the page already shows under that field (one error, once).
 */
export function ErrorText({
  error,
  besideFields = [],
}: {
  readonly error: unknown
  readonly besideFields?: ReadonlyArray<string>
}) {
  if (error === undefined || error === null) return null
  if (error instanceof ApiError && besideFields.length > 0) {
    const named = error.errors.length > 0 ? error.errors.map((x) => x.field) : error.field ? [error.field] : []
    if (named.length > 0 && named.every((f) => besideFields.includes(f))) return null
  }
  return (
    <p class="error" role="alert">
      {typeof error === "string" ? error : describe(error)}
    </p>
  )
}

export interface Column<T> {
  readonly title: string
  readonly cell: (row: T) => ComponentChildren
  /** Given: the column sorts by this value (a button in its header). */
  readonly sort?: (row: T) => string | number | null
}

interface TableProps<T> {
  readonly caption: string
  readonly columns: ReadonlyArray<Column<T>>
  readonly rows: ReadonlyArray<T>
  readonly rowKey: (row: T) => string | number
  readonly empty?: string
}

type SortState = { readonly title: string; readonly dir: "ascending" | "descending" } | undefined

function compare(a: string | number | null, b: string | number | null): number {
  if (a === b) return 0
  if (a === null) return 1
  if (b === null) return -1
  return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b))
}

/**
 * A table that scrolls sideways inside its box on a narrow screen rather than widening the page; the
 * box is a named region that takes the focus, so a keyboard can scroll it too. Columns with `sort`
 * sort the rows shown when their header is pressed (again: the other way).
 */
export function Table<T>({ caption, columns, rows, rowKey, empty = "Nothing yet." }: TableProps<T>) {
  const [sorted, setSorted] = useState<SortState>(undefined)
  if (rows.length === 0) return <p class="muted">{empty}</p>
  const by = sorted && columns.find((c) => c.title === sorted.title)?.sort
  const shown =
    by === undefined ? rows : [...rows].sort((a, b) => compare(by(a), by(b)) * (sorted!.dir === "ascending" ? 1 : -1))
  const toggle = (title: string) =>
    setSorted((s) =>
      s?.title === title
        ? { title, dir: s.dir === "ascending" ? "descending" : "ascending" }
        : { title, dir: "ascending" },
    )
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take the focus to be scrolled by keys
    <section class="table-wrap" aria-label={caption} tabIndex={0}>
      <table>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c.title} aria-sort={c.sort && sorted?.title === c.title ? sorted.dir : undefined}>
                {c.sort ? (
                  <button type="button" class="sort" onClick={() => toggle(c.title)}>
                    {c.title}
                  </button>
                ) : (
                  c.title
                )}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {shown.map((r) => (
            <tr key={rowKey(r)}>
              {columns.map((c) => (
                <td key={c.title}>{c.cell(r)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  )
}

/**
 * Tabs as the ARIA pattern has them: a tablist of buttons (arrow keys, Home and End move between
 * them), one panel shown; the others stay mounted but hidden, so a half-filled form survives a look
 * at another tab.
 */
export function Tabs({
  label,
  tabs,
  selected,
  onSelect,
}: {
  readonly label: string
  readonly tabs: ReadonlyArray<{ readonly id: string; readonly title: string; readonly panel: ComponentChildren }>
  readonly selected: string
  readonly onSelect: (id: string) => void
}) {
  const base = useId("tabs")
  const list = useRef<HTMLDivElement>(null)
  const onKey = (e: KeyboardEvent) => {
    // From the tab that has the focus (the selected one, unless a click moved it elsewhere).
    const focused = tabs.findIndex((t) => `${base}-${t.id}-tab` === (e.target as HTMLElement).id)
    const i = focused === -1 ? tabs.findIndex((t) => t.id === selected) : focused
    const next =
      e.key === "ArrowRight"
        ? (i + 1) % tabs.length
        : e.key === "ArrowLeft"
          ? (i - 1 + tabs.length) % tabs.length
          : e.key === "Home"
            ? 0
            : e.key === "End"
              ? tabs.length - 1
              : undefined
    if (next === undefined) return
    e.preventDefault()
    onSelect(tabs[next]!.id)
    list.current?.querySelectorAll<HTMLButtonElement>("[role=tab]")[next]?.focus()
  }
  return (
    <div class="tabs">
      <div role="tablist" aria-label={label} ref={list} onKeyDown={onKey}>
        {tabs.map((t) => (
          <button
            key={t.id}
            type="button"
            role="tab"
            id={`${base}-${t.id}-tab`}
            aria-selected={t.id === selected}
            aria-controls={`${base}-${t.id}`}
            tabIndex={t.id === selected ? 0 : -1}
            onClick={() => onSelect(t.id)}
          >
            {t.title}
          </button>
        ))}
      </div>
      {tabs.map((t) => (
        <div
          key={t.id}
          role="tabpanel"
          id={`${base}-${t.id}`}
          aria-labelledby={`${base}-${t.id}-tab`}
          hidden={t.id !== selected}
          class="tabpanel"
        >
          {t.panel}
        </div>
      ))}
    </div>
  )
}

/**
 * A drawer over the page's right side: a modal dialog named by its title; the focus moves into it,
 * stays in it (Tab wraps) and returns to what had it when it closes (Escape, the Close button, or a
 * click on the shade).
 */
export function Drawer({
  title,
  onClose,
  children,
}: {
  readonly title: string
  readonly onClose: () => void
  readonly children: ComponentChildren
}) {
  const id = useId("drawer")
  const box = useRef<HTMLDivElement>(null)
  const close = useRef(onClose)
  close.current = onClose
  useEffect(() => {
    const before = document.activeElement as HTMLElement | null
    box.current?.querySelector<HTMLElement>("h2")?.focus()
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") {
        e.preventDefault()
        close.current()
        return
      }
      if (e.key !== "Tab" || box.current === null) return
      const focusable = [
        ...box.current.querySelectorAll<HTMLElement>("button, a[href], input, select, textarea, [tabindex='0']"),
      ].filter((el) => !el.hasAttribute("disabled"))
      const first = focusable[0]
      const last = focusable[focusable.length - 1]
      if (first === undefined || last === undefined) return
      if (e.shiftKey && (document.activeElement === first || !box.current.contains(document.activeElement))) {
        e.preventDefault()
        last.focus()
      } else if (!e.shiftKey && document.activeElement === last) {
        e.preventDefault()
        first.focus()
      }
    }
    document.addEventListener("keydown", onKey)
    return () => {
      document.removeEventListener("keydown", onKey)
      before?.focus()
    }
  }, [])
  return (
    // biome-ignore lint/a11y/useKeyWithClickEvents: the keyboard closes it with Escape (handled on the document)
    // biome-ignore lint/a11y/noStaticElementInteractions: a click on the shade outside the drawer closes it
    <div class="drawer-shade" onClick={(e) => e.target === e.currentTarget && onClose()}>
      <div class="drawer" role="dialog" aria-modal="true" aria-labelledby={`${id}-h`} ref={box}>
        <div class="drawer-head">
          <h2 id={`${id}-h`} tabIndex={-1}>
            {title}
          </h2>
          <Button onClick={onClose}>Close</Button>
        </div>
        {children}
      </div>
    </div>
  )
}

/** Loads once (and again when `deps` change); `reload` refetches. */
export function useLoad<T>(load: () => Promise<T>, deps: ReadonlyArray<unknown> = []) {
  const [data, setData] = useState<T | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    load().then(
      (d) => {
        if (!live) return
        setData(d)
        setError(undefined)
      },
      (e: unknown) => {
        if (live) setError(e)
      },
    )
    return () => {
      live = false
    }
  }, [...deps, tick])
  return { data, error, reload: () => setTick((t) => t + 1) }
}

/** Repeats `fn` every `ms` while the component is shown (and once at once). */
export function useInterval(fn: () => void, ms: number, deps: ReadonlyArray<unknown> = []) {
  const saved = useRef(fn)
  saved.current = fn
  useEffect(() => {
    saved.current()
    const t = setInterval(() => saved.current(), ms)
    return () => clearInterval(t)
  }, [ms, ...deps])
}

/** Cents as money, e.g. 1234 → "$12.34". */
export function money(cents: number, currency = "USD"): string {
  return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(cents / 100)
}

/** Seconds as m:ss. */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds))
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`
}
