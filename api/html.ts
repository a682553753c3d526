// Small server-rendered pages (checkout hand-off, payment return, email preferences): escaping
// in one place so no query value ever reaches the page as markup.
import { bytes, type Reply } from "./reply.js"

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }
export const esc = (s: string | number): string => String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]!)

/** A value embedded in an inline script: JSON, with "<" escaped so it can't close the script. */
export const scriptJson = (v: unknown): string => JSON.stringify(v).replace(/</g, "\\u003c")

const STYLE =
  "body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1d1d1f}" +
  "h1{font-size:1.4rem}.muted{color:#6e6e73}"

export function page(title: string, body: string, status = 200): Reply {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${STYLE}</style>
</head><body>${body}</body></html>`
  return bytes("text/html; charset=utf-8", html, status, {
    "Cache-Control": "no-store",
    "Content-Security-Policy":
      "default-src 'self'; script-src 'self' 'unsafe-inline' https:; frame-src https:; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
  })
}
