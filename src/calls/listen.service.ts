// Listening in on a live call: the checks (the workspace's call, still live, heard as audio, a place
// among its listeners) and the serving of one listener by the process's listen hub.
import { Effect } from "effect"
import { Db } from "../platform/Db.js"
import { Conflict, NotFound, RateLimited } from "../platform/errors.js"
import type { StreamSink } from "../platform/live-hub.js"
import { ListenStreams } from "./ListenStreams.js"
import { heardCall } from "./listen.repo.js"
import { LISTENERS_PER_CALL } from "./listen-hub.js"

/** What a listener refused for the call's cap is told to wait: a place frees when someone stops. */
const FULL_RETRY_AFTER_SECONDS = 10

/**
 * Checks the call may be listened to and keeps the listener a place; hands back the function that
 * serves it: the call's mixed audio until the call's stream ends or the client leaves.
 */
export const openListenStream = (tenantId: number, callId: number) =>
  Effect.gen(function* () {
    const { sql } = yield* Db
    const hub = yield* ListenStreams
    const call = yield* Effect.promise(() => heardCall(sql, tenantId, callId))
    if (call === undefined) return yield* Effect.fail(new NotFound({ message: `call ${callId} not found` }))
    if (call.status === "ended")
      return yield* Effect.fail(
        new Conflict({ code: "CALL_NOT_LIVE", message: `call ${callId} has ended: there is nothing to listen to` }),
      )
    if (call.timeScale === null)
      return yield* Effect.fail(
        new Conflict({
          code: "CALL_NOT_HEARD",
          message: `call ${callId} is not heard as audio (it has no media stream), so it cannot be listened to`,
        }),
      )
    const ticket = hub.reserve(tenantId, callId, call.timeScale)
    if (ticket === undefined)
      return yield* Effect.fail(
        new RateLimited({
          message: `call ${callId} already has ${LISTENERS_PER_CALL} listeners, its most at once`,
          retryAfterSeconds: FULL_RETRY_AFTER_SECONDS,
        }),
      )
    return async (sink: StreamSink & { onClose(cb: () => void): void }): Promise<void> => {
      const listener = await hub.join(ticket, sink)
      const closed = new Promise<void>((resolve) => sink.onClose(resolve))
      void closed.then(() => hub.leave(listener))
      await closed
    }
  })
