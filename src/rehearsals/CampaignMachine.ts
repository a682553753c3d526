// The campaign's state machine as this domain asks for it, as a port: a snapshot of a stored
// campaign, its state, and one transition. Implemented where machines run (runtime/actors/sim-campaign.ts).

import { Context } from "effect"
import type {
  SimCampaignContext,
  SimCampaignEvent,
  SimCampaignSnapshot,
  SimCampaignState,
} from "../../machines/sim-campaign.machine.js"

/** An action the machine emits for an event (`releaseBatch`, `stopDialing`), with its params. */
export interface CampaignAction {
  readonly type: string
  readonly params?: unknown
}

export interface CampaignMachinePort {
  /** The snapshot of a stored campaign (only its state and counters are stored). */
  readonly snapshot: (state: SimCampaignState, context: SimCampaignContext) => SimCampaignSnapshot
  readonly stateOf: (snapshot: SimCampaignSnapshot) => SimCampaignState
  /** The next snapshot and the actions to perform, as xstate's pure `transition` gives them. */
  readonly transition: (
    snapshot: SimCampaignSnapshot,
    event: SimCampaignEvent,
  ) => readonly [SimCampaignSnapshot, ReadonlyArray<CampaignAction>]
}

export class CampaignMachine extends Context.Tag("parley/CampaignMachine")<CampaignMachine, CampaignMachinePort>() {}
