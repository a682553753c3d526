// The simulation campaign's machine, run here for src/rehearsals (its CampaignMachine port), since only
// runtime/ runs machines: snapshots of stored campaigns and xstate's pure transition function.
import { Layer } from "effect"
import { transition } from "xstate"
import { simCampaignMachine, simCampaignSnapshot, simCampaignState } from "../../machines/sim-campaign.machine.js"
import { CampaignMachine } from "../../src/rehearsals/CampaignMachine.js"

export const CampaignMachineLive: Layer.Layer<CampaignMachine> = Layer.succeed(CampaignMachine, {
  snapshot: simCampaignSnapshot,
  stateOf: simCampaignState,
  transition: (snapshot, event) => transition(simCampaignMachine, snapshot, event),
})
