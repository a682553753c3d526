// The services every handler and actor may use, composed once: configuration and logging at
// the bottom, then the database (migrated), the bus and the providers on top.
import { Effect, Layer } from "effect"
import type { Logger } from "pino"
import type { ApiServices } from "../../api/services.js"
import { CampaignMachineLive } from "../../runtime/actors/sim-campaign.js"
import { ApprovalStreamsLive } from "../approvals/ApprovalStreams.js"
import { ApprovalMetricsLive } from "../approvals/approvals.metrics.js"
import { AuthLive } from "../auth/Auth.js"
import { ChallengeLive } from "../auth/Challenge.js"
import { ListenStreamsLive } from "../calls/ListenStreams.js"
import { StreamTokenSweeperLive } from "../calls/media-stream-tokens.sweeper.js"
import { DemoSweeperLive } from "../demo/demo.sweeper.js"
import { IdempotencySweeperLive } from "../idempotency/idempotency.sweeper.js"
import { KeyUseLogLive } from "../keys/KeyUseLog.js"
import { NumberAccounts } from "../numbers/numbers.parts.js"
import { Credentials, CredentialsLive } from "../onboarding/Credentials.js"
import { AppConfig } from "../platform/AppConfig.js"
import { BusLive } from "../platform/Bus.js"
import { Clock } from "../platform/Clock.js"
import type { Config } from "../platform/config.js"
import { Db, DbLive } from "../platform/Db.js"
import { Instance, type ProcessInstance } from "../platform/Instance.js"
import { Log } from "../platform/Log.js"
import { migrate } from "../platform/Migrator.js"
import { LlmLive } from "../providers/Llm.js"
import { MailLive } from "../providers/Mail.js"
import { PaymentsLive } from "../providers/Payments.js"
import { SpeechLive } from "../providers/Speech.js"
import { TelephonyLive } from "../providers/Telephony.js"
import { RecordingsLive } from "../recordings/recordings.service.js"
import { RecordingSweeperLive } from "../recordings/recordings.sweeper.js"
import { RunCallbacksLive } from "../runs/run-callbacks.js"
import { TurnStreamsLive } from "../turns/TurnStreams.js"
import { TurnWritersLive } from "../turns/turn-writer.js"
import { PreviewSweeperLive } from "../voices/previews.sweeper.js"
import { VoiceSamplesLive } from "../voices/VoiceSamples.js"
import { WebhookRetentionSweeperLive } from "../webhooks/retention.sweeper.js"
import { WorkflowVoicesLive } from "../workflows/workflow-voices.js"

/**
 * What the app provides: every service a route may require (api/services.ts), which are also all
 * the runtime host asks for. A service only the runtime used would be added to this union.
 */
export type AppServices = ApiServices

/** Applies pending migrations once the database is up; a failure stops start-up. */
const Migrated = Layer.effectDiscard(
  Effect.gen(function* () {
    const db = yield* Db
    const log = yield* Log
    const applied = yield* Effect.promise(() => migrate(db.sql))
    if (applied.length > 0) log.info({ applied }, "migrations applied")
  }),
)

export function appLayer(deps: {
  config: Config
  logger: Logger
  instance: ProcessInstance
}): Layer.Layer<AppServices> {
  const base = Layer.mergeAll(
    AppConfig.layer(deps.config),
    Log.layer(deps.logger),
    Clock.live,
    Instance.layer(deps.instance),
  )
  const db = Migrated.pipe(Layer.provideMerge(DbLive))
  const providers = Layer.mergeAll(
    VoiceSamplesLive.pipe(Layer.provideMerge(SpeechLive)),
    MailLive,
    PaymentsLive,
    LlmLive,
    TelephonyLive,
  )
  const infra = Layer.mergeAll(db, BusLive, providers).pipe(Layer.provideMerge(base))
  // byok workspaces' numbers live on their own telco_a account, from their stored credential.
  const numberAccounts = Layer.effect(
    NumberAccounts,
    Effect.map(Credentials, (c) => ({ byokTelcoA: c.telcoAAccount })),
  )
  const credentials = numberAccounts.pipe(Layer.provideMerge(CredentialsLive))
  // Background loops with no service of their own (each checks the process role itself).
  return Layer.mergeAll(
    // The authenticator records API keys' last uses through the keys domain (auth's KeyUseLog port).
    AuthLive.pipe(Layer.provide(KeyUseLogLive)),
    ChallengeLive,
    TurnStreamsLive,
    TurnWritersLive,
    ApprovalStreamsLive,
    ListenStreamsLive,
    ApprovalMetricsLive,
    RunCallbacksLive,
    WorkflowVoicesLive,
    CampaignMachineLive,
    credentials,
    PreviewSweeperLive,
    DemoSweeperLive,
    IdempotencySweeperLive,
    StreamTokenSweeperLive,
    WebhookRetentionSweeperLive,
    RecordingSweeperLive.pipe(Layer.provideMerge(RecordingsLive)),
  ).pipe(Layer.provideMerge(infra))
}
