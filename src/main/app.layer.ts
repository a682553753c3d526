// The services every handler and actor may use, composed once: configuration and logging at
// the bottom, then the database (migrated), the bus and the providers on top.
import { Effect, Layer } from "effect"
import type { Logger } from "pino"
import { type ApprovalStreams, ApprovalStreamsLive } from "../approvals/ApprovalStreams.js"
import { type Auth, AuthLive } from "../auth/Auth.js"
import { type Challenge, ChallengeLive } from "../auth/Challenge.js"
import { DemoSweeperLive } from "../demo/demo.sweeper.js"
import { IdempotencySweeperLive } from "../idempotency/idempotency.sweeper.js"
import { KeyUseLogLive } from "../keys/KeyUseLog.js"
import { NumberAccounts } from "../numbers/numbers.parts.js"
import { Credentials, CredentialsLive } from "../onboarding/Credentials.js"
import { AppConfig } from "../platform/AppConfig.js"
import { type Bus, BusLive } from "../platform/Bus.js"
import { Clock } from "../platform/Clock.js"
import type { Config } from "../platform/config.js"
import { Db, DbLive } from "../platform/Db.js"
import { Instance, type ProcessInstance } from "../platform/Instance.js"
import { Log } from "../platform/Log.js"
import { migrate } from "../platform/Migrator.js"
import { PreviewSweeperLive } from "../previews/previews.sweeper.js"
import { type Llm, LlmLive } from "../providers/Llm.js"
import { type Mail, MailLive } from "../providers/Mail.js"
import { type Payments, PaymentsLive } from "../providers/Payments.js"
import { type Speech, SpeechLive } from "../providers/Speech.js"
import { type Telephony, TelephonyLive } from "../providers/Telephony.js"
import { type TurnStreams, TurnStreamsLive } from "../turns/TurnStreams.js"
import { type VoiceSamples, VoiceSamplesLive } from "../voices/VoiceSamples.js"
import { WebhookRetentionSweeperLive } from "../webhooks/retention.sweeper.js"

export type AppServices =
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
  | ApprovalStreams
  | Credentials

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
    ApprovalStreamsLive,
    credentials,
    PreviewSweeperLive,
    DemoSweeperLive,
    IdempotencySweeperLive,
    WebhookRetentionSweeperLive,
  ).pipe(Layer.provideMerge(infra))
}
