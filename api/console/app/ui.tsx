// Shared pieces of the console's pages: buttons, labelled fields, error lines and tables, so every
// page gets labels, focus and error wording the same way.
import type { ButtonHTMLAttributes, ComponentChildren } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { describe } from "./api.js"

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

/** An error from the API (or anything thrown) in words; nothing when there is none. */
export function ErrorText({ error }: { readonly error: unknown }) {
  if (error === undefined || error === null) return null
  return (
    <p class="error" role="alert">
      {typeof error === "string" ? error : describe(error)}
    </p>
  )
}

interface TableProps<T> {
  readonly caption: string
  readonly columns: ReadonlyArray<{ readonly title: string; readonly cell: (row: T) => ComponentChildren }>
  readonly rows: ReadonlyArray<T>
  readonly rowKey: (row: T) => string | number
  readonly empty?: string
}

/** A table that scrolls sideways inside its box on a narrow screen rather than widening the page. */
export function Table<T>({ caption, columns, rows, rowKey, empty = "Nothing yet." }: TableProps<T>) {
  if (rows.length === 0) return <p class="muted">{empty}</p>
  return (
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c.title}>
                {c.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={rowKey(r)}>
              {columns.map((c) => (
                <td key={c.title}>{c.cell(r)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
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
