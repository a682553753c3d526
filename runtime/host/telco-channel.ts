// Delivers telco_a webhooks to the leg they belong to: each leg subscribes to its call's subject
// while it lives, and the api process that received the webhook asks over the bus.
import type { Logger } from "pino"
import type { BusClient } from "../../src/platform/bus/bus.js"
import { rtTelcoCall, type TelcoWebhookMessage } from "../../src/platform/subjects.js"
import type { WebhookChannel } from "../../src/providers/telephony/telco-a.telephony.js"

export function busWebhookChannel(bus: BusClient, log: Logger): WebhookChannel {
  return {
    register(callId, handlers) {
      const sub = bus.subscribe(rtTelcoCall(callId), (msg) => {
        let m: TelcoWebhookMessage
        try {
          m = msg.json<TelcoWebhookMessage>()
        } catch {
          return
        }
        if (m.kind === "status") {
          handlers.status(m.params)
          msg.respond("ok")
          return
        }
        // Not awaited: a voice webhook waits for the agent, and status callbacks must not queue behind it.
        void handlers.voice(m.params).then(
          (doc) => msg.respond(doc),
          (err: unknown) => log.error({ err, call_id: callId }, "voice webhook failed"),
        )
      })
      return () => sub.unsubscribe()
    },
  }
}
