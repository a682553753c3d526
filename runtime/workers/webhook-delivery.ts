// The webhook delivery worker of a runtime process: claims due deliveries by lease (any number of
// processes side by side, each delivery posted by one at a time), posts each signed event to its
// endpoint (webhook-post.ts) and records the attempt, its verdict (src/webhooks/delivery.ts) and
// the endpoint's health. A nudge on rt.webhooks.due (queue group) or the poll finds work; a process
// killed mid-post leaves a lease that runs out, and another process posts the event again (at least
// once). Claims keep to per-endpoint and per-workspace caps, so receivers that hang cannot hold
// every slot.
import { Duration, Effect, Fiber } from "effect"
import type { Logger } from "pino"
import { adminEmails } from "../../src/auth/auth.repo.js"
import { BatchWriter } from "../../src/platform/batch-writer.js"
import type { BusClient, BusSubscription } from "../../src/platform/bus/bus.js"
import type { Config } from "../../src/platform/config.js"
import { retryOnDisconnect, type Sql } from "../../src/platform/Db.js"
import { Log } from "../../src/platform/Log.js"
import { periodic } from "../../src/platform/periodic.js"
import { RT_WEBHOOKS_DUE, RUNTIME_QUEUE } from "../../src/platform/subjects.js"
import type { MailProvider } from "../../src/providers/mail/mail.interface.js"
import {
  describeAttempt,
  failedTooLong,
  IN_FLIGHT_PER_ENDPOINT,
  IN_FLIGHT_PER_FAILING_ENDPOINT,
  IN_FLIGHT_PER_WORKSPACE,
  judge,
  retryDelayMs,
} from "../../src/webhooks/delivery.js"
import { disableFailingEndpoint, trackEndpointHealth } from "../../src/webhooks/endpoints.repo.js"
import {
  type AttemptRecord,
  type ClaimedDelivery,
  claimDueDeliveries,
  queueState,
  recordAttempt,
  recordAttempts,
  WEBHOOKS_DUE_CHANNEL,
} from "../../src/webhooks/outbox.repo.js"
import {
  trackWebhookQueue,
  webhookAttemptsFailed,
  webhookLagSeconds,
  webhooksDelivered,
} from "../../src/webhooks/webhooks.metrics.js"
import { webhookPoster } from "./webhook-post.js"

/** How often a process looks for due deliveries when no nudge came: the backstop of commit → first attempt. */
const POLL_MS = 250
/**
 * Finding nothing, the backstop slows down (doubling) to this, so an idle process (an embedded
 * install with no endpoint at all) does not query its database four times a second; a claim or a
 * nudge brings it back to POLL_MS.
 */
const IDLE_POLL_MS = 2_000
/** Posts in flight at once in one process. */
const CONCURRENCY = 32
/** The lease outlasts the attempt's timeout by this much (recording it, a slow database). */
const LEASE_MARGIN_MS = 5_000

export interface WebhookDeliveryDeps {
  readonly sql: Sql
  readonly bus: BusClient
  readonly log: Logger
  readonly config: Config
  /** This process's instance id: the lease holder. */
  readonly me: string
  /** Tells a workspace's admins their endpoint was disabled; undefined: logged only. */
  readonly mail: MailProvider | undefined
}

export interface WebhookDeliveryWorker {
  /** Looks for due deliveries now (coalesced with a look already running). */
  poke(): void
  /** Claims nothing more and waits for the posts in flight (each bounded by WEBHOOK_TIMEOUT_MS). */
  stop(): Promise<void>
}

export function startWebhookDelivery(deps: WebhookDeliveryDeps): WebhookDeliveryWorker {
  const { sql, bus, log, config, me } = deps
  const timeoutMs = config.webhookTimeoutMs
  const scale = config.webhookRetryScale
  const leaseMs = timeoutMs + LEASE_MARGIN_MS
  const post = webhookPoster({ sql, log, config })
  const caps = {
    perEndpoint: IN_FLIGHT_PER_ENDPOINT,
    perFailingEndpoint: IN_FLIGHT_PER_FAILING_ENDPOINT,
    perWorkspace: IN_FLIGHT_PER_WORKSPACE,
  }

  // The successes finishing together are recorded in one statement (with up to CONCURRENCY posts in
  // flight, one each cost a pool connection and a round trip per delivery).
  const successes = new BatchWriter<"attempts", AttemptRecord, boolean>(
    (_, group) => retryOnDisconnect(() => recordAttempts(sql, group)),
    { maxBatch: 1_000, splitRefused: true },
  )
  const inFlight = new Set<Promise<void>>()
  let stopping = false
  let looking = false
  let again = false
  /** The last claim filled every free slot: more may be due. */
  let backlog = false
  /**
   * Where the last claim left due deliveries behind for a cap: one of theirs finishing makes room,
   * so the next claim comes then rather than at the next poll.
   */
  let heldEndpoints: ReadonlySet<number> = new Set()
  let heldWorkspaces: ReadonlySet<number> = new Set()

  /**
   * Claims what this process has room for; a full batch means more may be due, so others are nudged
   * too. True when it claimed something (or was busy already).
   */
  const look = async (): Promise<boolean> => {
    if (stopping) return false
    if (looking) {
      again = true
      return true
    }
    looking = true
    let found = false
    try {
      do {
        again = false
        const room = CONCURRENCY - inFlight.size
        if (room <= 0) break
        const claim = await claimDueDeliveries(sql, me, leaseMs, room, caps)
        const claimed = claim.deliveries
        heldEndpoints = claim.heldEndpoints
        heldWorkspaces = claim.heldWorkspaces
        if (claimed.length > 0) found = true
        for (const d of claimed) {
          const p = deliver(d).catch((err: unknown) =>
            log.error({ err, delivery_id: d.id }, "webhook delivery failed to record"),
          )
          inFlight.add(p)
          void p.finally(() => {
            inFlight.delete(p)
            // Work may be waiting: claim again once half the slots are free, a batch at a time
            // rather than one claim per finished post; or at once when this post's endpoint or
            // workspace had deliveries held back by its cap (its room just grew).
            if (
              (backlog && inFlight.size <= CONCURRENCY / 2) ||
              heldEndpoints.has(d.endpoint_id) ||
              heldWorkspaces.has(d.tenant_id)
            )
              poke()
          })
        }
        backlog = claimed.length === room
        if (backlog && claimed.length > 0) {
          try {
            bus.publish(RT_WEBHOOKS_DUE)
          } catch {} // a nudge only: the poll finds the backlog without it
        }
      } while (again && !stopping)
    } catch (err) {
      log.error({ err }, "webhook claim failed")
    } finally {
      looking = false
    }
    return found
  }
  const poke = (): void => void look()

  // The backstop poll (src/platform/periodic.ts): at POLL_MS while it finds work, slower when idle.
  let pollMs = POLL_MS
  let poller: Fiber.RuntimeFiber<never> | undefined
  const startPolling = (): void => {
    poller = Effect.runFork(
      periodic({
        what: "webhook delivery poll",
        every: () => Duration.millis(pollMs),
        tick: Effect.promise(async () => {
          pollMs = (await look()) ? POLL_MS : Math.min(pollMs * 2, IDLE_POLL_MS)
        }),
      }).pipe(Effect.provideService(Log, log)),
    )
  }
  /** A nudge: look now, and poll at full speed again. */
  const nudged = (): void => {
    pollMs = POLL_MS
    poke()
  }

  const deliver = async (d: ClaimedDelivery): Promise<void> => {
    const attempt = d.attempts + 1
    if (d.attempts === 0) webhookLagSeconds.observe(Math.max(0, d.lag_seconds))
    const startedAt = new Date()
    const t0 = performance.now()
    const { result, snippet } = await post(d)
    const latencyMs = Math.round(performance.now() - t0)
    const verdict = judge(result, attempt)
    const retryInMs = verdict.outcome === "retry" ? retryDelayMs(attempt, scale) : null
    const error = describeAttempt(result, timeoutMs, snippet)
    const status = result.kind === "answered" || result.kind === "redirect" ? result.status : null
    const record = {
      deliveryId: d.id,
      me,
      attempt,
      startedAt,
      outcome: verdict.outcome,
      statusCode: status,
      latencyMs,
      error,
      retryInMs,
    }
    let disabled: { tenant_id: number; url: string } | undefined
    // The common case, a success to a healthy endpoint, is one statement; anything that touches the
    // endpoint's health commits with the attempt.
    const recorded =
      verdict.outcome === "delivered" && !d.endpoint_failing
        ? await successes.submit("attempts", record)
        : await sql.begin(async (tx) => {
            if (!(await recordAttempt(tx, record))) return false
            const since = await trackEndpointHealth(tx, d.endpoint_id, verdict.outcome === "delivered", startedAt)
            if (since !== null && failedTooLong(since, new Date(), scale))
              disabled = await disableFailingEndpoint(tx, d.endpoint_id)
            return true
          })
    if (!recorded) {
      // Our lease ran out and another process took the delivery: its record stands.
      log.warn({ delivery_id: d.id, event_id: d.event_id }, "webhook attempt not recorded: lease lost")
      return
    }
    if (verdict.outcome === "delivered") webhooksDelivered.inc()
    else webhookAttemptsFailed.inc({ reason: verdict.reason, outcome: verdict.outcome })
    log.info(
      {
        delivery_id: d.id,
        event_id: d.event_id,
        endpoint_id: d.endpoint_id,
        attempt,
        outcome: verdict.outcome,
        status_code: status,
        latency_ms: latencyMs,
        ...(retryInMs !== null && { retry_in_ms: retryInMs }),
      },
      "webhook attempt",
    )
    if (disabled !== undefined) await endpointDisabled(d.endpoint_id, disabled)
  }

  const endpointDisabled = async (endpointId: number, ep: { tenant_id: number; url: string }): Promise<void> => {
    log.warn({ endpoint_id: endpointId, tenant_id: ep.tenant_id }, "webhook endpoint disabled: failing for 5 days")
    if (deps.mail === undefined) return
    const text =
      `Parley could not deliver webhooks to ${ep.url} (endpoint ${endpointId}): every attempt failed for ` +
      "5 days, so the endpoint is now disabled and no further events are sent to it. Fix the receiver, " +
      "then enable the endpoint again (PATCH /api/webhooks/endpoints/{id} with enabled: true)."
    for (const to of await adminEmails(sql, ep.tenant_id)) {
      await deps.mail
        .send({
          to,
          kind: "webhook_endpoint_disabled",
          subject: "Parley disabled a failing webhook endpoint",
          text,
          html: `<p>${escapeHtml(text)}</p>`,
          links: [],
        })
        .catch((err: unknown) => log.warn({ err, tenant_id: ep.tenant_id }, "webhook disabled mail not sent"))
    }
  }

  const untrackQueue = trackWebhookQueue(() => queueState(sql))
  const subscription: BusSubscription = bus.subscribe(RT_WEBHOOKS_DUE, nudged, { queue: RUNTIME_QUEUE })
  // On real PostgreSQL the commit of a delivery wakes every runtime process at once (a NOTIFY sent by
  // the statements that make deliveries due, outbox.repo.ts); the poll is the backstop. The embedded
  // database keeps to the poll: a LISTEN would hold one of its few connections for good.
  let listening: Promise<{ unlisten(): Promise<void> } | undefined> = Promise.resolve(undefined)
  if (config.databaseUrl !== undefined)
    listening = sql.listen(WEBHOOKS_DUE_CHANNEL, nudged).catch((err: unknown) => {
      log.warn({ err }, "webhook LISTEN failed: polling only")
      return undefined
    })
  startPolling()
  log.info({ instance: me }, "webhook delivery started")

  return {
    poke: nudged,
    stop: async () => {
      stopping = true
      untrackQueue()
      if (poller !== undefined) await Effect.runPromise(Fiber.interrupt(poller))
      // Stopping: a subscription or listener whose connection is already gone has nothing to drain.
      await subscription.drain().catch(() => {})
      await (await listening)?.unlisten().catch(() => {})
      while (looking) await new Promise((r) => setTimeout(r, 10))
      await Promise.all([...inFlight])
    },
  }
}

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)
