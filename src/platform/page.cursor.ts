// Cursor pages of the newest-first lists (GET /api/workflows, /api/workflows/{id}/runs, /numbers):
// `limit` and an opaque `cursor` in the query, `next_cursor` beside the list, null on the last page.
//
// These lists are ordered by id, newest first, and each has an (owner, id desc) index, so a page
// is one index range and its position is one id. The timeline's `time~key` cursor
// (src/timeline/timeline.cursor.ts) exists because it merges several sources by time; ordering
// these lists by time instead would make every page sort all of a workspace's rows.

export const LIST_DEFAULT_LIMIT = 50
export const LIST_MAX_LIMIT = 200

export interface ListPage {
  readonly limit: number
  /** Rows with a smaller id than this come next; undefined on the first page. */
  readonly before: number | undefined
}

// A version tag inside the cursor lets its form change later without misreading old cursors.
const PREFIX = "id:"

/** The cursor after a row: opaque to clients (base64url), so they send it back as given. */
export const encodeListCursor = (id: number): string => Buffer.from(`${PREFIX}${id}`).toString("base64url")

/** A cursor this server issued → the id it stands for; undefined for anything else. */
export function parseListCursor(raw: string): number | undefined {
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(raw)) return undefined
  const text = Buffer.from(raw, "base64url").toString("utf8")
  const m = /^id:([1-9]\d{0,15})$/.exec(text)
  const id = m === null ? NaN : Number(m[1])
  return Number.isSafeInteger(id) ? id : undefined
}

/**
 * Rows read with `limit + 1`, newest first → the page and the cursor after its last row; the
 * extra row only says there is more, so the last page's cursor is null.
 */
export function pageOf<T extends { readonly id: number }>(
  rows: ReadonlyArray<T>,
  limit: number,
): { rows: T[]; next_cursor: string | null } {
  const page = rows.slice(0, limit)
  const last = page[page.length - 1]
  return { rows: page, next_cursor: rows.length > limit && last !== undefined ? encodeListCursor(last.id) : null }
}
