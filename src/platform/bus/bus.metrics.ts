// The bus's metrics: messages published and delivered, and reconnections.
import { Counter } from "prom-client"
import { FastCounter, registers } from "../metrics.js"

const busMessages = new FastCounter(
  "parley_bus_messages_total",
  "Bus messages published (out) and delivered to this process's subscriptions (in; NATS only)",
)
export const busOut = busMessages.child({ direction: "out" })
export const busIn = busMessages.child({ direction: "in" })

export const busReconnects = new Counter({
  name: "parley_bus_reconnects_total",
  help: "Times the NATS connection was re-established after a disconnect",
  registers,
})
