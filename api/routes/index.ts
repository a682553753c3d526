// The route table: every endpoint the api role serves, in one list. The router, the auth and
// validation checks, and /openapi.json are all driven from it.
import { consoleRoutes } from "../console/console.routes.js"
import type { AnyRoute } from "../route.js"
import apiKeysCreate from "./api-keys.create.js"
import apiKeysDelete from "./api-keys.delete.js"
import apiKeysList from "./api-keys.list.js"
import apiKeysRevoke from "./api-keys.revoke.js"
import approvalsDecide from "./approvals.decide.js"
import approvalsList from "./approvals.list.js"
import approvalsStream from "./approvals.stream.js"
import auditList from "./audit.list.js"
import authAltchaChallenge from "./auth.altcha-challenge.js"
import authLogin from "./auth.login.js"
import authLogout from "./auth.logout.js"
import authMe from "./auth.me.js"
import { otpResend, otpStart, otpVerify } from "./auth.otp.js"
import authSignup from "./auth.signup.js"
import { verifyEmailGet, verifyEmailResend } from "./auth.verify-email.js"
import { billingReturn, gwUpiCheckout } from "./billing.pages.js"
import { paymentMethodsDelete, paymentMethodsList } from "./billing.payment-methods.js"
import { subscriptionCancel, subscriptionCreate, subscriptionGet } from "./billing.subscription.js"
import { billingAutochargePost, billingAutochargePut, billingTopup } from "./billing.topup.js"
import { billingBalance, billingHistory, billingPrecheck } from "./billing.wallet.js"
import { gwCardWebhook, gwUpiWebhook, paymentWebhook, stubWebhook } from "./billing.webhooks.js"
import callsGet from "./calls.get.js"
import callsListen from "./calls.listen.js"
import callsRecording from "./calls.recording.js"
import callsTakeOver from "./calls.take-over.js"
import { dataChatGet, dataChatPost } from "./data.chat.js"
import {
  dataSourceDelete,
  dataSourceFetch,
  dataSourceGet,
  dataSourceRows,
  dataSourcesCreate,
  dataSourcesList,
} from "./data.sources.js"
import { demoCall, demoCloneVoice, demoFeedGet, demoVoicePreviewPost } from "./demo.js"
import dncAdd from "./dnc.add.js"
import dncCheck from "./dnc.check.js"
import dncDelete from "./dnc.delete.js"
import dncImport from "./dnc.import.js"
import dncList from "./dnc.list.js"
import dsrErase from "./dsr.erase.js"
import dsrExport from "./dsr.export.js"
import dsrRecordings from "./dsr.recordings.js"
import { emailPageRoutes } from "./email.pages.js"
import { mailAWebhook, mailBWebhook } from "./email.webhooks.js"
import health from "./health.get.js"
import internalAttribution from "./internal.attribution.js"
import { dialLimitsDelete, dialLimitsGet, dialLimitsPut } from "./internal.dial-limits.js"
import internalOutreachCall from "./internal.outreach-call.js"
import internalOutreachEmail from "./internal.outreach-email.js"
import internalOutreachPatchIn from "./internal.outreach-patch-in.js"
import internalTurns from "./internal.turns.js"
import internalUsageEvents from "./internal.usage-events.js"
import { feedbackCreate, feedbackList } from "./kb.feedback.js"
import kbRollup from "./kb.rollup.js"
import { kbRuleDelete, kbRuleGet, kbRulesCreate, kbRulesList, kbRuleUpdate } from "./kb.rules.js"
import { kbExport, kbImport } from "./kb.transfer.js"
import { memberRoutes } from "./members.js"
import metricsGet from "./metrics.get.js"
import numbersImport from "./numbers.import.js"
import numbersList from "./numbers.list.js"
import numbersProvision from "./numbers.provision.js"
import { numbersDelete, numbersRelease } from "./numbers.release.js"
import numbersSearch from "./numbers.search.js"
import objectionsGet from "./objections.get.js"
import objectionsList from "./objections.list.js"
import onboardingComplete from "./onboarding.complete.js"
import { credentialsDelete, credentialsPut } from "./onboarding.credentials.js"
import onboardingMode from "./onboarding.mode.js"
import onboardingProviders from "./onboarding.providers.js"
import onboardingStatus from "./onboarding.status.js"
import { openApiRoute } from "./openapi.get.js"
import { personasAssign, personasCreate, personasDelete, personasList, personasUpdate } from "./personas.js"
import pricing from "./pricing.get.js"
import reportsCallsPerDay from "./reports.calls-per-day.js"
import reportsWeekly from "./reports.weekly.js"
import runsLive from "./runs.live.js"
import runsResults from "./runs.results.js"
import runsTurnsStream from "./runs.turns-stream.js"
import {
  simCampaignsAnswer,
  simCampaignsCreate,
  simCampaignsGet,
  simCampaignsList,
  simCampaignsResume,
  simCampaignsRunBatch,
  simCampaignsStop,
} from "./sim.campaigns.js"
import simPersonas from "./sim.personas.js"
import { storefrontCallback, storefrontDisconnect, storefrontInstall, storefrontStatus } from "./storefront.js"
import {
  telcoAIncoming,
  telcoAIncomingGet,
  telcoAStatusCallback,
  telcoAStatusCallbackGet,
  telcoBIncoming,
  telcoBIncomingGet,
} from "./telco.webhooks.js"
import timelineGet from "./timeline.get.js"
import { voiceAvatarsAssign, voiceAvatarsClone, voiceAvatarsDelete, voiceAvatarsList } from "./voice-avatars.js"
import voicesList from "./voices.list.js"
import voicesSample from "./voices.sample.js"
import {
  webhookDeliveryRetry,
  webhookEndpointDelete,
  webhookEndpointDeliveries,
  webhookEndpointGet,
  webhookEndpointRotate,
  webhookEndpointsCreate,
  webhookEndpointsList,
  webhookEndpointTest,
  webhookEndpointUpdate,
} from "./webhooks.endpoints.js"
import { webhookWalletThresholdGet, webhookWalletThresholdPut } from "./webhooks.wallet-threshold.js"
import workflowsAnalytics from "./workflows.analytics.js"
import workflowsAudience from "./workflows.audience.js"
import workflowsCompliance from "./workflows.compliance.js"
import workflowsCreate from "./workflows.create.js"
import { experimentsCreate, experimentsGet, experimentsList, experimentsPatch } from "./workflows.experiments.js"
import workflowsGet from "./workflows.get.js"
import workflowsList from "./workflows.list.js"
import { previewOpeningAudio, previewOpeningCreate } from "./workflows.preview-opening.js"
import workflowsRegenerate from "./workflows.regenerate.js"
import { workflowDelete, workflowRetire } from "./workflows.retire.js"
import { workflowPause, workflowRun } from "./workflows.run.js"
import workflowsRuns from "./workflows.runs.js"
import workflowsUpdate from "./workflows.update.js"
import { workspaceGet, workspaceUpdate } from "./workspace.js"

/** The product's routes; `extra` lets tests mount probes beside them in the same table. */
export function routeTable(extra: ReadonlyArray<AnyRoute> = []): AnyRoute[] {
  const table: AnyRoute[] = [
    health,
    metricsGet,
    pricing,
    voicesList,
    voicesSample,
    voiceAvatarsList,
    voiceAvatarsClone,
    voiceAvatarsAssign,
    voiceAvatarsDelete,
    personasList,
    personasCreate,
    personasAssign,
    personasUpdate,
    personasDelete,
    simPersonas,
    simCampaignsList,
    simCampaignsCreate,
    simCampaignsGet,
    simCampaignsRunBatch,
    simCampaignsAnswer,
    simCampaignsResume,
    simCampaignsStop,
    previewOpeningCreate,
    previewOpeningAudio,
    workflowsList,
    workflowsCreate,
    workflowsGet,
    workflowsUpdate,
    workflowsRegenerate,
    workflowsCompliance,
    workflowRetire,
    experimentsCreate,
    experimentsList,
    experimentsGet,
    experimentsPatch,
    workflowDelete,
    workflowsRuns,
    workflowRun,
    workflowPause,
    runsLive,
    runsTurnsStream,
    runsResults,
    callsGet,
    callsListen,
    callsRecording,
    callsTakeOver,
    timelineGet,
    telcoAIncoming,
    telcoAIncomingGet,
    telcoAStatusCallback,
    telcoAStatusCallbackGet,
    telcoBIncoming,
    telcoBIncomingGet,
    reportsWeekly,
    reportsCallsPerDay,
    approvalsList,
    approvalsStream,
    approvalsDecide,
    internalTurns,
    internalOutreachPatchIn,
    internalOutreachCall,
    internalUsageEvents,
    dialLimitsGet,
    dialLimitsPut,
    dialLimitsDelete,
    internalAttribution,
    workflowsAnalytics,
    workflowsAudience,
    dataSourcesList,
    dataSourcesCreate,
    dataSourceGet,
    dataSourceDelete,
    dataSourceRows,
    dataSourceFetch,
    dataChatPost,
    dataChatGet,
    dncList,
    dncAdd,
    dncCheck,
    dncImport,
    dncDelete,
    dsrExport,
    dsrErase,
    dsrRecordings,
    kbRulesList,
    kbRulesCreate,
    kbRuleGet,
    kbRuleUpdate,
    kbRuleDelete,
    kbExport,
    kbImport,
    feedbackCreate,
    feedbackList,
    kbRollup,
    objectionsList,
    objectionsGet,
    authSignup,
    verifyEmailGet,
    verifyEmailResend,
    authLogin,
    authLogout,
    authMe,
    authAltchaChallenge,
    otpStart,
    otpResend,
    otpVerify,
    apiKeysList,
    apiKeysCreate,
    apiKeysRevoke,
    apiKeysDelete,
    ...memberRoutes,
    workspaceGet,
    workspaceUpdate,
    auditList,
    billingBalance,
    billingPrecheck,
    billingHistory,
    billingTopup,
    billingAutochargePut,
    billingAutochargePost,
    paymentMethodsList,
    paymentMethodsDelete,
    gwUpiCheckout,
    billingReturn,
    subscriptionGet,
    subscriptionCreate,
    subscriptionCancel,
    stubWebhook,
    gwCardWebhook,
    gwUpiWebhook,
    paymentWebhook,
    numbersList,
    numbersSearch,
    numbersProvision,
    numbersImport,
    numbersDelete,
    numbersRelease,
    onboardingProviders,
    onboardingStatus,
    onboardingMode,
    credentialsPut,
    credentialsDelete,
    onboardingComplete,
    demoCall,
    demoFeedGet,
    demoCloneVoice,
    demoVoicePreviewPost,
    storefrontInstall,
    storefrontCallback,
    storefrontStatus,
    storefrontDisconnect,
    internalOutreachEmail,
    ...emailPageRoutes,
    mailAWebhook,
    mailBWebhook,
    webhookEndpointsList,
    webhookEndpointsCreate,
    webhookEndpointGet,
    webhookEndpointUpdate,
    webhookEndpointDelete,
    webhookEndpointRotate,
    webhookEndpointTest,
    webhookEndpointDeliveries,
    webhookDeliveryRetry,
    webhookWalletThresholdGet,
    webhookWalletThresholdPut,
    ...consoleRoutes,
    ...extra,
  ]
  table.push(openApiRoute(() => table))
  return table
}
