// Workflows' side of the voices' WorkflowVoices port (src/voices/WorkflowVoices.ts): a workflow's
// cloned voice is written through workflows.repo. The layer is wired in src/main/app.layer.ts.
import { Layer } from "effect"
import { WorkflowVoices } from "../voices/WorkflowVoices.js"
import { clearVoiceFromWorkflows, setWorkflowVoice } from "./workflows.repo.js"

export const WorkflowVoicesLive: Layer.Layer<WorkflowVoices> = Layer.succeed(WorkflowVoices, {
  assign: setWorkflowVoice,
  unassignEverywhere: clearVoiceFromWorkflows,
})
