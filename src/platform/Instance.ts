// Who this process is: a unique id, its role, and when it started. Health checks and bus
// connection names use it; leases will too.
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import { Context, Layer } from "effect"

export type Role = "all" | "api" | "runtime"

export interface ProcessInstance {
  readonly id: string
  readonly role: Role
  readonly host: string
  readonly startedAt: Date
}

export class Instance extends Context.Tag("parley/Instance")<Instance, ProcessInstance>() {
  static make(role: Role): ProcessInstance {
    return { id: `${process.pid}-${randomBytes(4).toString("hex")}`, role, host: hostname(), startedAt: new Date() }
  }

  static layer(instance: ProcessInstance): Layer.Layer<Instance> {
    return Layer.succeed(Instance, instance)
  }
}
