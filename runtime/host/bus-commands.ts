// What a runtime process hears on the bus: the api's commands (a run to claim or wake, pause,
// resume, cancel, end a call, an approval decided, a call to patch through to an operator),
// workspaces' rule changes, and pings. Each is passed to the run driver it concerns, if it runs here.
import type { BusClient, BusSubscription } from "../../src/platform/bus/bus.js"
import type { ProcessInstance } from "../../src/platform/Instance.js"
import {
  type ApprovalDecided,
  type CallHandoffRequest,
  EXPERIMENT_CHANGED_ANY,
  type ExperimentChanged,
  KB_RULES_CHANGED_ANY,
  type KbRulesChanged,
  RT_APPROVAL_DECIDED,
  RT_CALL_HANDOFF_ANY,
  RT_PING,
  RT_RUN_CONTROL,
  RT_RUN_WAKE,
  RUNTIME_QUEUE,
  type RunControl,
  type RuntimePong,
} from "../../src/platform/subjects.js"
import type { RunDriver } from "../actors/run-driver.js"

/** The subscriptions, drained when the process stops (RT_PING and RT_RUN_WAKE first: see stop()). */
export const listenForCommands = (d: {
  readonly bus: BusClient
  readonly instance: ProcessInstance
  /** The runs this process drives, by run id. */
  readonly drivers: ReadonlyMap<number, RunDriver>
  /** Claims the run if it needs an owner (the lease row decides). */
  readonly claim: (runId: number) => Promise<void>
  /** How calls heard as audio are recognised here (undefined: MEDIA_STREAMS=none). */
  readonly recognition?: "pocketsphinx" | "script" | undefined
}): BusSubscription[] => {
  const { bus, instance, drivers, claim } = d
  const pong: RuntimePong = {
    instance_id: instance.id,
    host: instance.host,
    started_at: instance.startedAt.toISOString(),
    recognition: d.recognition ?? null,
  }
  return [
    bus.subscribe(RT_PING, (msg) => void msg.respond(pong), { queue: RUNTIME_QUEUE }),
    // Any one runtime process claims a started or resumed run; the lease row decides, not the message.
    // A run it drives already looks for due targets again (a simulation campaign released a batch).
    bus.subscribe(
      RT_RUN_WAKE,
      (msg) => {
        const runId = msg.json<RunControl>().run_id
        drivers.get(runId)?.poke()
        return claim(runId)
      },
      { queue: RUNTIME_QUEUE },
    ),
    bus.subscribe(RT_RUN_CONTROL, (msg) => {
      const c = msg.json<RunControl>()
      if (c.command === "pause" || c.command === "resume" || c.command === "cancel")
        drivers.get(c.run_id)?.control(c.command)
      else if (c.command === "end_call" && c.call_id !== undefined) drivers.get(c.run_id)?.endCall(c.call_id)
    }),
    bus.subscribe(RT_APPROVAL_DECIDED, (msg) => {
      const d = msg.json<ApprovalDecided & { decided_by?: number | null }>()
      if (d.run_id !== null)
        drivers
          .get(d.run_id)
          ?.approvalDecided(d.approval_id, d.call_id, d.status, d.decided_by ?? null, d.value_minor ?? null)
    }),
    // Patch-in: every runtime process hears it (no queue group); only the one holding the call answers.
    bus.subscribe(RT_CALL_HANDOFF_ANY, (msg) => {
      const r = msg.json<CallHandoffRequest>()
      for (const d of drivers.values()) {
        if (d.tenantId !== r.tenant_id) continue
        const reply = d.handOff(r.call_id, r.operator_number)
        if (reply === undefined) continue
        // Not awaited: the conference takes a while and other calls' patch-ins must not queue behind it.
        void reply.then((rep) => msg.respond(rep))
        return
      }
    }),
    // Every runtime process hears every experiment change (no queue group): each reloads its own runs'.
    bus.subscribe(EXPERIMENT_CHANGED_ANY, (msg) => {
      const c = msg.json<ExperimentChanged>()
      for (const d of drivers.values())
        if (d.tenantId === c.tenant_id && d.workflowId === c.workflow_id) d.experimentChanged()
    }),
    // Every runtime process hears every rule change (no queue group): each reloads its own runs'.
    bus.subscribe(KB_RULES_CHANGED_ANY, (msg) => {
      const c = msg.json<KbRulesChanged>()
      for (const d of drivers.values())
        if (d.tenantId === c.tenant_id && (c.workflow_id === null || c.workflow_id === d.rulesWorkflowId))
          d.rulesChanged()
    }),
  ]
}
