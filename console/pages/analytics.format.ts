// How the Analytics view writes its numbers, in one place and the same in every browser and locale,
// so a test can compute from the API's JSON exactly the text the page shows.

/** A rate 0..1 as a percentage with one decimal: 0.4567 → "45.7%"; null (nothing counted) → "—". */
export const percent = (x: number | null | undefined): string =>
  x === null || x === undefined ? "—" : `${(x * 100).toFixed(1)}%`

/** `n` as a share of `of` (a funnel step of the one before it); "—" when there is nothing to share. */
export const share = (n: number, of: number): string => (of > 0 ? percent(n / of) : "—")

/** A 95% interval of a rate: "[12.3%–45.6%]". */
export const interval = (low: number, high: number): string => `[${percent(low)}–${percent(high)}]`

/** A difference of two rates in percentage points, signed: 0.123 → "+12.3 pts", -0.05 → "-5.0 pts". */
export const points = (d: number): string => `${d >= 0 ? "+" : "-"}${Math.abs(d * 100).toFixed(1)} pts`

/** A difference's interval in points: "[-3.0 to +27.5 pts]". */
export const pointsInterval = (low: number, high: number): string =>
  `[${points(low).replace(" pts", "")} to ${points(high)}]`

/** Minor units as money in en-US whatever the reader's locale: 1234, "USD" → "$12.34"; null → "—". */
export const moneyMinor = (minor: number | null | undefined, currency: string): string =>
  minor === null || minor === undefined
    ? "—"
    : new Intl.NumberFormat("en-US", { style: "currency", currency }).format(minor / 100)

/** Milliseconds, rounded: 512.4 → "512 ms"; null → "—". */
export const millis = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? "—" : `${Math.round(ms)} ms`

/** Seconds with one decimal: 42.25 → "42.3 s"; null → "—". */
export const seconds = (s: number | null | undefined): string =>
  s === null || s === undefined ? "—" : `${s.toFixed(1)} s`

/** A heat-map cell's tooltip: connects of dials, "3/7". */
export const ofDials = (connects: number, dials: number): string => `${connects}/${dials}`

/** A heat-map cell's text: the connect rate as a whole percentage, "43%"; empty without dials. */
export const cellRate = (connects: number, dials: number): string =>
  dials > 0 ? `${Math.round((connects / dials) * 100)}%` : ""
