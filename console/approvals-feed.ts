// The signed-in console's one GET /api/approvals/stream: the workspace's pending count (the
// Approvals tab's badge, on every page) and its approval changes, for any page to follow without
// polling. One EventSource per tab, opened by the shell while signed in, so pages add no stream.
import { useEffect, useRef, useState } from "preact/hooks"
import { request } from "./api.js"

/** A stream the browser gave up on (a refused or failed answer) is opened again after this. */
const REOPEN_MS = 5_000

type Listener = () => void

let source: EventSource | undefined
let retry: ReturnType<typeof setTimeout> | undefined
let running = false
let pending: number | undefined
const countListeners = new Set<Listener>()
const changeListeners = new Set<Listener>()

const tellCount = () => {
  for (const cb of countListeners) cb()
}
const tellChange = () => {
  for (const cb of changeListeners) cb()
}

function connect(): void {
  if (!running) return
  const s = new EventSource("/api/approvals/stream")
  source = s
  // Opened (or reopened): changes made while it was down were not sent, so every follower reads afresh.
  s.onopen = tellChange
  s.onmessage = tellChange
  s.addEventListener("pending", (e) => {
    try {
      const n = (JSON.parse((e as MessageEvent<string>).data) as { pending?: unknown }).pending
      if (typeof n === "number" && n !== pending) {
        pending = n
        tellCount()
      }
    } catch {
      // A frame that does not parse changes nothing.
    }
  })
  s.onerror = () => {
    if (s.readyState !== EventSource.CLOSED || source !== s) return
    // The browser gave up (a refused answer): a 401 from /auth/me sends the app to sign-in; anything
    // else is tried again shortly.
    request("GET", "/auth/me").then(
      () => {
        if (running && source === s) retry = setTimeout(connect, REOPEN_MS)
      },
      () => undefined,
    )
  }
}

/** Opens the feed (the shell, once signed in); the function returned closes it and forgets the count. */
export function startApprovalsFeed(): () => void {
  running = true
  connect()
  return () => {
    running = false
    clearTimeout(retry)
    source?.close()
    source = undefined
    pending = undefined
    tellCount()
  }
}

/** The workspace's pending approvals as last pushed; undefined until the stream has said. */
export function usePendingCount(): number | undefined {
  const [n, setN] = useState(pending)
  useEffect(() => {
    const on = () => setN(pending)
    countListeners.add(on)
    on()
    return () => {
      countListeners.delete(on)
    }
  }, [])
  return n
}

/**
 * Calls `onChange` whenever an approval of the workspace changes (created, decided, expired,
 * cancelled) and whenever the stream (re)opens; read what you show again then.
 */
export function useApprovalChanges(onChange: () => void): void {
  const saved = useRef(onChange)
  saved.current = onChange
  useEffect(() => {
    const on = () => saved.current()
    changeListeners.add(on)
    return () => {
      changeListeners.delete(on)
    }
  }, [])
}
