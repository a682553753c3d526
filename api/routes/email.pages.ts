// The email preference pages behind the HMAC token of an outreach email: GET /email/unsubscribe
// (leaves the token's channel), POST /email/unsubscribe (RFC 8058 one-click; also the page's form),
// GET|POST /email/resubscribe, GET /email/preferences (every channel with a toggle form) and
// POST /email/preferences (the toggle). Small server-rendered pages: every value escaped, a CSP that
// allows no script at all, idempotent. A missing or malformed token is a 400 page, a token we did
// not sign (tampered, unknown key) a 404 page: never JSON, never a 5xx.
import { Effect } from "effect"
import { z } from "zod"
import { preferencesOf, resubscribe, unsubscribe } from "../../src/email/email.service.js"
import { type TokenClaims, verifyToken } from "../../src/email/email.token.js"
import { Db } from "../../src/platform/Db.js"
import { esc, page } from "../html.js"
import type { Reply } from "../reply.js"
import { route } from "../route.js"

const CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

const html = (title: string, body: string, status = 200): Reply => {
  const r = page(title, body, status)
  return { ...r, headers: { ...r.headers, "Content-Security-Policy": CSP } }
}

const Query = z.object({ t: z.string().max(4000).optional() })

const channelName = (c: string) => (c === "outreach" ? "outreach" : c.replace(/[_-]/g, " "))

/** The token from the query, else from a urlencoded form body (field t). */
function tokenOf(query: { readonly t?: string | undefined }, rawBody: Buffer | undefined): string | undefined {
  if (query.t !== undefined && query.t !== "") return query.t
  if (rawBody === undefined || rawBody.length === 0 || rawBody.length > 8000) return undefined
  return new URLSearchParams(rawBody.toString("utf8")).get("t") ?? undefined
}

const formField = (rawBody: Buffer | undefined, name: string): string | undefined =>
  rawBody === undefined || rawBody.length > 8000
    ? undefined
    : (new URLSearchParams(rawBody.toString("utf8")).get(name) ?? undefined)

/** Runs `then` with the token's claims, or answers with the 400/404 page. */
const withToken = <E, R>(
  token: string | undefined,
  then: (c: TokenClaims) => Effect.Effect<Reply, E, R>,
): Effect.Effect<Reply, E, R | Db> =>
  Effect.gen(function* () {
    if (token === undefined)
      return html("Link incomplete", "<h1>This link is incomplete</h1><p>Open the link from the email again.</p>", 400)
    const { sql } = yield* Db
    const claims = yield* Effect.promise(() => verifyToken(sql, token))
    if (claims === "malformed")
      return html("Link not valid", "<h1>This link is not valid</h1><p>Open the link from the email again.</p>", 400)
    if (claims === "invalid")
      return html("Link not recognised", "<h1>This link is not recognised</h1><p>It may have been altered.</p>", 404)
    return yield* then(claims)
  })

const hidden = (token: string) => `<input type="hidden" name="t" value="${esc(token)}">`

const unsubscribedPage = (c: TokenClaims, token: string) =>
  html(
    "Unsubscribed",
    `<h1>You are unsubscribed</h1><p><strong>${esc(c.email)}</strong> will get no more ` +
      `${esc(channelName(c.channel))} email from this sender.</p>` +
      `<form method="post" action="/email/resubscribe">${hidden(token)}<button>Resubscribe</button></form>` +
      `<p class="muted"><a href="/email/preferences?t=${esc(encodeURIComponent(token))}">All email preferences</a></p>`,
  )

interface PageCtx {
  readonly query: { readonly t?: string | undefined }
  readonly rawBody: Buffer
}

const unsubscribeHandler =
  (via: string) =>
  ({ query, rawBody }: PageCtx) => {
    const token = tokenOf(query, rawBody)
    return withToken(token, (c) => Effect.map(unsubscribe(c, via), () => unsubscribedPage(c, token!)))
  }

export const emailUnsubscribeGet = route({
  method: "GET",
  path: "/email/unsubscribe",
  auth: "public",
  summary: "Unsubscribe the token's address from the token's channel (HTML; idempotent)",
  tags: ["email"],
  query: Query,
  responses: { 200: { description: "HTML", contentType: "text/html" } },
  handler: unsubscribeHandler("link"),
})

export const emailUnsubscribePost = route({
  method: "POST",
  path: "/email/unsubscribe",
  auth: "public",
  summary: "RFC 8058 one-click unsubscribe (List-Unsubscribe=One-Click); token in the query or form field t",
  tags: ["email"],
  query: Query,
  body: { raw: true },
  responses: { 200: { description: "HTML", contentType: "text/html" } },
  handler: unsubscribeHandler("one-click"),
})

const resubscribeHandler = ({ query, rawBody }: PageCtx) => {
  const token = tokenOf(query, rawBody)
  return withToken(token, (c) =>
    Effect.map(resubscribe(c), () =>
      html(
        "Resubscribed",
        `<h1>You are subscribed again</h1><p><strong>${esc(c.email)}</strong> will get ` +
          `${esc(channelName(c.channel))} email from this sender again.</p>` +
          `<form method="post" action="/email/unsubscribe">${hidden(token!)}<button>Unsubscribe</button></form>` +
          `<p class="muted"><a href="/email/preferences?t=${esc(encodeURIComponent(token!))}">` +
          "All email preferences</a></p>",
      ),
    ),
  )
}

export const emailResubscribeGet = route({
  method: "GET",
  path: "/email/resubscribe",
  auth: "public",
  summary: "Resubscribe the token's address to the token's channel (HTML; idempotent)",
  tags: ["email"],
  query: Query,
  responses: { 200: { description: "HTML", contentType: "text/html" } },
  handler: resubscribeHandler,
})

export const emailResubscribePost = route({
  method: "POST",
  path: "/email/resubscribe",
  auth: "public",
  summary: "Resubscribe (the form on the unsubscribe page); token in the query or form field t",
  tags: ["email"],
  query: Query,
  body: { raw: true },
  responses: { 200: { description: "HTML", contentType: "text/html" } },
  handler: resubscribeHandler,
})

const preferencesPage = (c: TokenClaims, note?: string) =>
  Effect.map(preferencesOf(c), (p) => {
    const rows = p.channels
      .map(
        (ch) =>
          `<li><strong>${esc(channelName(ch.channel))}</strong>: ${ch.subscribed ? "subscribed" : "unsubscribed"} ` +
          `<form method="post" action="/email/preferences" style="display:inline">${hidden(ch.token)}` +
          `<input type="hidden" name="action" value="${ch.subscribed ? "unsubscribe" : "subscribe"}">` +
          `<button>${ch.subscribed ? "Unsubscribe" : "Subscribe"}</button></form></li>`,
      )
      .join("")
    const suppressed = p.suppressed
      .map((s) => `<p class="muted">No email is sent to this address (${esc(s.reason.replace(/_/g, " "))}).</p>`)
      .join("")
    return html(
      "Email preferences",
      `<h1>Email preferences</h1><p>For <strong>${esc(c.email)}</strong></p>` +
        (note === undefined ? "" : `<p>${esc(note)}</p>`) +
        `<ul>${rows}</ul>${suppressed}`,
    )
  })

export const emailPreferencesGet = route({
  method: "GET",
  path: "/email/preferences",
  auth: "public",
  summary: "Every channel of the token's address with its state and a one-click toggle (HTML)",
  tags: ["email"],
  query: Query,
  responses: { 200: { description: "HTML", contentType: "text/html" } },
  handler: ({ query }) => withToken(query.t || undefined, (c) => preferencesPage(c)),
})

export const emailPreferencesPost = route({
  method: "POST",
  path: "/email/preferences",
  auth: "public",
  summary: "Toggle one channel (form fields t and action=subscribe|unsubscribe); answers with the preferences page",
  tags: ["email"],
  query: Query,
  body: { raw: true },
  responses: { 200: { description: "HTML", contentType: "text/html" } },
  handler: ({ query, rawBody }) =>
    withToken(tokenOf(query, rawBody), (c) =>
      Effect.gen(function* () {
        const action = formField(rawBody, "action")
        if (action === "unsubscribe") yield* unsubscribe(c, "preferences")
        else if (action === "subscribe") yield* resubscribe(c)
        else
          return html(
            "Choose an action",
            "<h1>Nothing changed</h1><p>Use the buttons on the preferences page.</p>",
            400,
          )
        return yield* preferencesPage(c, "Your preferences are saved.")
      }),
    ),
})

export const emailPageRoutes = [
  emailUnsubscribeGet,
  emailUnsubscribePost,
  emailResubscribeGet,
  emailResubscribePost,
  emailPreferencesGet,
  emailPreferencesPost,
]
