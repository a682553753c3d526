// Puts every subject of one deployment under a prefix (BUS_NAMESPACE), so several deployments
// or test suites can share one NATS server without hearing each other.
import type { BusClient, BusMsg } from "./bus.js"

export function namespaced(bus: BusClient, namespace: string): BusClient {
  if (namespace === "") return bus
  const pre = `${namespace}.`
  // Replies travel on inbox subjects chosen by the bus; only the caller's subjects get the prefix.
  const strip = (msg: BusMsg): BusMsg => {
    const subject = msg.subject.startsWith(pre) ? msg.subject.slice(pre.length) : msg.subject
    return Object.create(msg, { subject: { value: subject, enumerable: true } }) as BusMsg
  }
  return {
    kind: bus.kind,
    publish: (subject, payload, opts) => bus.publish(pre + subject, payload, opts),
    subscribe: (subject, handler, opts) => {
      const sub = bus.subscribe(pre + subject, (msg) => handler(strip(msg)), opts)
      return { subject, unsubscribe: () => sub.unsubscribe(), drain: () => sub.drain() }
    },
    request: async (subject, payload, opts) => strip(await bus.request(pre + subject, payload, opts)),
    gather: async (subject, payload, opts) => (await bus.gather(pre + subject, payload, opts)).map(strip),
    flush: () => bus.flush(),
    status: () => bus.status(),
    drain: () => bus.drain(),
  }
}
