// POST /api/calls/{call_id}/take-over: a supervisor hands a live call over to an operator (the
// patch-in: the callee joins a recorded conference, the operator is dialed, the agent drops).
import { Effect } from "effect"
import { z } from "zod"
import { auditActorOf } from "../../src/auth/principal.js"
import { takeOverCall } from "../../src/calls/take-over.service.js"
import { json } from "../reply.js"
import { route } from "../route.js"
import { E164Phone, Id } from "../schemas.js"
import { callerOf } from "../session.js"

export default route({
  method: "POST",
  path: "/api/calls/{call_id}/take-over",
  auth: "jwt",
  permission: "supervise",
  audit: "service",
  summary:
    "Take a live call over (owners, admins, supervisors): the callee joins a recorded conference, the operator " +
    "(operator_number, default OPERATOR_NUMBER) is dialed into it and the agent drops; the call ends handed_off. " +
    "Answers once the conference is set up (up to a minute while the operator's phone rings)",
  tags: ["calls"],
  params: z.object({ call_id: Id }),
  // No body, or no operator_number: the deployment's OPERATOR_NUMBER.
  body: { json: z.object({ operator_number: E164Phone.optional() }).optional() },
  responses: {
    200: {
      description:
        '{call_id, run_id, status: "handed_off", conference_id, operator_number (E.164), recorded: true}. ' +
        "Audited as call.taken_over (call.take_over_failed for a 502), with the actor and the operator number",
    },
    404: { description: "NOT_FOUND: no such call in this workspace" },
    409: {
      description:
        "CALL_NOT_LIVE: the call has ended; CALL_HANDED_OFF: it was already handed off; CONFLICT: nobody is on " +
        "the line to hand over yet (ringing, voicemail, hanging up)",
    },
    422: {
      description:
        "VALIDATION_FAILED (field operator_number): not an international phone number, or none given and no " +
        "OPERATOR_NUMBER is configured",
    },
    502: {
      description:
        "GATEWAY_UNAVAILABLE: the conference could not be set up (the operator did not answer); the callee is " +
        "released and the call ends handoff_failed",
    },
  },
  handler: ({ principal, params, body, clientIp }) =>
    Effect.gen(function* () {
      const caller = yield* callerOf(principal)
      return json(yield* takeOverCall(auditActorOf(caller, clientIp), params.call_id, body?.operator_number))
    }),
})
