// The services a route's handler may require, named here so api/ never imports the composition
// root: src/main/app.layer.ts provides exactly these (its AppServices is this union).
import type { ApprovalStreams } from "../src/approvals/ApprovalStreams.js"
import type { RunCallbacks } from "../src/approvals/RunCallbacks.js"
import type { Auth } from "../src/auth/Auth.js"
import type { Challenge } from "../src/auth/Challenge.js"
import type { ListenStreams } from "../src/calls/ListenStreams.js"
import type { Credentials } from "../src/onboarding/Credentials.js"
import type { AppConfig } from "../src/platform/AppConfig.js"
import type { Bus } from "../src/platform/Bus.js"
import type { Clock } from "../src/platform/Clock.js"
import type { Db } from "../src/platform/Db.js"
import type { Instance } from "../src/platform/Instance.js"
import type { Log } from "../src/platform/Log.js"
import type { Llm } from "../src/providers/Llm.js"
import type { Mail } from "../src/providers/Mail.js"
import type { Payments } from "../src/providers/Payments.js"
import type { Speech } from "../src/providers/Speech.js"
import type { Telephony } from "../src/providers/Telephony.js"
import type { Recordings } from "../src/recordings/recordings.service.js"
import type { CampaignMachine } from "../src/rehearsals/CampaignMachine.js"
import type { TurnStreams } from "../src/turns/TurnStreams.js"
import type { TurnWriters } from "../src/turns/turn-writer.js"
import type { VoiceSamples } from "../src/voices/VoiceSamples.js"
import type { WorkflowVoices } from "../src/voices/WorkflowVoices.js"

export type ApiServices =
  | AppConfig
  | Log
  | Clock
  | Instance
  | Db
  | Bus
  | Speech
  | VoiceSamples
  | Auth
  | Challenge
  | Mail
  | Payments
  | Llm
  | Telephony
  | TurnStreams
  | TurnWriters
  | ApprovalStreams
  | ListenStreams
  | Recordings
  | Credentials
  | RunCallbacks
  | CampaignMachine
  | WorkflowVoices
