// THE registry of contact-bearing tables: every table that holds a callee's phone or email, or rows
// about them, how a contact's rows are found, which part of the export shows them and what erase does.
// Export (src/dsr/export.*) and erase (src/dsr/erase.*) both walk it; test/dsr/registry.test.ts fails
// when a migration adds a phone/email column that is neither registered here nor listed in EXCLUDED.
// Data only: the SQL that follows these descriptions lives in src/dsr/export.repo.ts and, for the
// erase, in each table's own repository (src/dsr/erase.repo.ts runs their parts).

/** The identifier kind a column holds. */
export type IdentifierKind = "phone" | "email"

/** The export bundle's sections. */
export type BundleKey =
  | "targets"
  | "run_targets"
  | "calls"
  | "turns"
  | "approvals"
  | "timeline"
  | "dnc"
  | "cooldown"
  | "consent"
  | "messages"
  | "email_events"
  | "email_preferences"
  | "email_suppressions"
  | "kb_feedback"
  | "data_source_rows"
  | "data_source_messages"
  | "inbound_calls"
  | "dial_decisions"
  | "demo_calls"
  | "kb_events"
  | "usage_events"
  | "call_analyses"
  | "webhook_events"

/**
 * How a contact's rows are found.
 * - column: a column equals the normalised identifier (E.164 or lower-cased email), in the workspace.
 * - target: rows of the contact's audience_targets (by target_id), in the workspace.
 * - call: rows of the contact's calls (by call_id).
 * - turn: rows of the contact's turns (by turn_id).
 * - run: rows of runs that dialled the contact (demo calls: one run per demo call).
 * - jsonb: a JSONB (or text) column whose text contains the identifier (no fixed key holds it).
 * - upload: unlogged staging rows, by phone, of the workspace's uploads in progress.
 * - message: rows whose provider message id is one of the workspace's messages to the email.
 */
export type Finder = "column" | "target" | "call" | "turn" | "run" | "jsonb" | "upload" | "message"

/**
 * What erase does with the contact's rows.
 * - delete: the rows go.
 * - hash: the row stays for audit; each identifier column is replaced with `erased:<hash>`
 *   (src/erasure/contact-hash.ts erasedMarker), free-text/JSONB columns that held the identifier are cleared.
 * - cancel: pending rows are cancelled first (approvals), then the row is treated as `hash`.
 */
export type EraseAction = "delete" | "hash" | "cancel"

export interface ContactTable {
  readonly table: string
  /** Columns holding an identifier directly. */
  readonly columns: readonly { readonly name: string; readonly kind: IdentifierKind }[]
  /** Columns (JSONB or free text) that may contain an identifier anywhere in their text. */
  readonly freeText: readonly string[]
  /** How the contact's rows are found; the first finder is the primary one. */
  readonly finders: readonly Finder[]
  /** false: the table has no tenant_id of its own (the workspace is reached through a join). */
  readonly tenantColumn: boolean
  /** Which export section shows the rows (null: not exported, see note). */
  readonly bundle: BundleKey | null
  readonly erase: EraseAction
  /** Retention: how long rows stay when nobody erases them. */
  readonly retention: string
  readonly note: string
}

export const CONTACT_TABLES: readonly ContactTable[] = [
  {
    table: "audience_targets",
    columns: [{ name: "phone_e164", kind: "phone" }],
    freeText: ["name", "fields"],
    finders: ["column", "jsonb"],
    tenantColumn: true,
    bundle: "targets",
    erase: "delete",
    retention: "until the workflow's audience is replaced or the contact is erased",
    note: "fields (every other uploaded column) may hold the contact's email; found by it too.",
  },
  {
    table: "audience_staging",
    columns: [{ name: "phone_e164", kind: "phone" }],
    freeText: ["name", "fields"],
    finders: ["upload"],
    tenantColumn: false,
    bundle: null,
    erase: "delete",
    retention: "only while an upload is in progress (unlogged; merged or deleted when it ends)",
    note: "Transient rows of uploads in progress; not exported (they become audience_targets).",
  },
  {
    table: "run_targets",
    columns: [{ name: "phone_e164", kind: "phone" }],
    freeText: [],
    finders: ["column", "target"],
    tenantColumn: true,
    bundle: "run_targets",
    erase: "hash",
    retention: "for the life of the run",
    note: "Where the dialer stands with the contact per run; kept (hashed) so run counts stay whole.",
  },
  {
    table: "calls",
    columns: [{ name: "phone_e164", kind: "phone" }],
    freeText: [],
    finders: ["column", "target"],
    tenantColumn: true,
    bundle: "calls",
    erase: "hash",
    retention: "kept: usage and ledger entries reference calls (cost, minutes)",
    note: "Every dial attempt. Kept for billing audit with the phone replaced by its hash.",
  },
  {
    table: "turns",
    columns: [],
    freeText: ["text"],
    finders: ["target", "call", "jsonb"],
    tenantColumn: true,
    bundle: "turns",
    erase: "delete",
    retention: "until erased (the transcript of each call)",
    note: "No identifier column: the turns of the contact's targets and calls, and turns whose text names them.",
  },
  {
    table: "call_analyses",
    columns: [],
    freeText: ["summary", "fields", "error"],
    finders: ["call"],
    tenantColumn: true,
    bundle: "call_analyses",
    erase: "delete",
    retention: "for as long as the call is kept (the post-call analysis of each answered call)",
    note:
      "What the contact said, summarised and extracted (fields may hold a phone or an email); found by " +
      "the contact's calls. Deleted on erase; the analysis worker does not enqueue an erased call again.",
  },
  {
    table: "approvals",
    columns: [{ name: "target_phone", kind: "phone" }],
    freeText: ["context", "snapshot", "rationale"],
    finders: ["column", "call"],
    tenantColumn: true,
    bundle: "approvals",
    erase: "cancel",
    retention: "kept: the compliance record of decisions (phone hashed, context cleared on erase)",
    note: "Pending approvals are cancelled on erase; decided ones stay, hashed.",
  },
  {
    table: "dnc_entries",
    columns: [{ name: "phone_e164", kind: "phone" }],
    freeText: ["reason"],
    finders: ["column"],
    tenantColumn: true,
    bundle: "dnc",
    erase: "hash",
    retention: "until removed from the list (compliance record)",
    note: "Kept with the phone hashed: the contact stays suppressed (erased_contacts does the refusing).",
  },
  {
    table: "recent_contacts",
    columns: [{ name: "phone_e164", kind: "phone" }],
    freeText: [],
    finders: ["column"],
    tenantColumn: true,
    bundle: "cooldown",
    erase: "delete",
    retention: "last contact time per number (read by the 7-day cool-down)",
    note: "Deleted on erase: erased_contacts suppresses the number for good, so the cool-down is moot.",
  },
  {
    table: "inbound_calls",
    columns: [{ name: "from_e164", kind: "phone" }],
    freeText: ["greeting"],
    finders: ["column"],
    tenantColumn: true,
    bundle: "inbound_calls",
    erase: "hash",
    retention: "kept: inbound minutes are billed",
    note: "to_e164 is the workspace's own number (phone_numbers), not the contact's.",
  },
  {
    table: "dial_decisions",
    columns: [],
    freeText: ["detail"],
    finders: ["target"],
    tenantColumn: true,
    bundle: "dial_decisions",
    erase: "hash",
    retention: "kept: why the dialer dialled, held or skipped (compliance record)",
    note: "No identifier column; found by target_id. Kept (the target_id is then a dangling reference).",
  },
  {
    table: "kb_feedback",
    columns: [],
    freeText: ["line", "note"],
    finders: ["turn"],
    tenantColumn: true,
    bundle: "kb_feedback",
    erase: "delete",
    retention: "until erased or the rule it taught is archived",
    note: "Reviewers' verdicts on the contact's turns (kb_rule_feedback links go with them).",
  },
  {
    table: "kb_events",
    columns: [],
    freeText: ["detail"],
    finders: ["turn", "jsonb"],
    tenantColumn: true,
    bundle: "kb_events",
    erase: "hash",
    retention: "kept: the history of the workspace's rules (the timeline's kb events)",
    note: "Events of the contact's feedback (feedback_id), and any whose detail quotes the identifier (scrubbed).",
  },
  {
    table: "usage_events",
    columns: [],
    freeText: ["attributes"],
    finders: ["jsonb"],
    tenantColumn: true,
    bundle: "usage_events",
    erase: "hash",
    retention: "kept: usage is billed (ledger entries reference it)",
    note: "attributes are the caller's; found (and scrubbed on erase) when they quote the identifier.",
  },
  {
    table: "webhook_events",
    columns: [],
    freeText: ["body"],
    finders: ["jsonb", "call"],
    tenantColumn: true,
    bundle: "webhook_events",
    erase: "delete",
    retention: "30 days (WEBHOOK_RETENTION_DAYS), and longer while a delivery to a live endpoint is pending",
    note:
      "Outbound events as sent: call.*, approval.* and call.analyzed name the contact's call (and its " +
      "phone, name, extracted fields), message.* the address. Deleted on erase with their deliveries " +
      "and attempts (on delete cascade), so a queued delivery never sends the contact afterwards.",
  },
  {
    table: "runs",
    columns: [],
    freeText: ["snapshot"],
    finders: ["jsonb"],
    tenantColumn: true,
    bundle: null,
    erase: "hash",
    retention: "for the life of the workflow",
    note:
      "The run's persisted actor snapshot may quote a number; not exported (internal state whose " +
      "contact data is the targets, calls and turns already exported); scrubbed on erase.",
  },
  {
    table: "email_messages",
    columns: [{ name: "to_email", kind: "email" }],
    freeText: ["subject", "error"],
    finders: ["column"],
    tenantColumn: true,
    bundle: "messages",
    erase: "hash",
    retention: "kept: sends are counted and billed",
    note: "Outreach and transactional mail to the address.",
  },
  {
    table: "email_events",
    columns: [{ name: "to_email", kind: "email" }],
    freeText: ["detail"],
    finders: ["column"],
    tenantColumn: true,
    bundle: "email_events",
    erase: "delete",
    retention: "until erased (the message.* timeline)",
    note: "Delivery, open, click, unsubscribe events of the address.",
  },
  {
    table: "email_preferences",
    columns: [{ name: "email", kind: "email" }],
    freeText: [],
    finders: ["column"],
    tenantColumn: true,
    bundle: "email_preferences",
    erase: "delete",
    retention: "until changed or erased",
    note: "Per-channel subscription choices. Erase suppresses the address by hash instead.",
  },
  {
    table: "email_suppressions",
    columns: [{ name: "email", kind: "email" }],
    freeText: [],
    finders: ["column"],
    tenantColumn: true,
    bundle: "email_suppressions",
    erase: "delete",
    retention: "for good (hard bounce, complaint, unsubscribe)",
    note: "Workspace rows only (tenant_id = the workspace); tenant_id 0 rows are global (provider facts).",
  },
  {
    table: "email_soft_bounces",
    columns: [{ name: "email", kind: "email" }],
    freeText: [],
    finders: ["column"],
    tenantColumn: false,
    bundle: "email_suppressions",
    erase: "delete",
    retention: "until the address delivers again",
    note: "Global (no tenant): exported and erased only when the workspace sent mail to the address.",
  },
  {
    table: "email_webhook_events",
    columns: [{ name: "email", kind: "email" }],
    freeText: ["payload"],
    finders: ["message"],
    tenantColumn: false,
    bundle: "email_events",
    erase: "delete",
    retention: "dedup record of provider events",
    note: "No tenant: reached through provider_message_id of the workspace's email_messages.",
  },
  {
    table: "data_source_rows",
    columns: [],
    freeText: ["data"],
    finders: ["jsonb"],
    tenantColumn: false,
    bundle: "data_source_rows",
    erase: "delete",
    retention: "until the source is refreshed or deleted",
    note: "Customer rows (JSONB) of the workspace's data sources whose text holds the identifier.",
  },
  {
    table: "data_source_messages",
    columns: [],
    freeText: ["text", "data"],
    finders: ["jsonb"],
    tenantColumn: true,
    bundle: "data_source_messages",
    erase: "delete",
    retention: "until the source is deleted",
    note: "Data-chat messages that quote the identifier.",
  },
  {
    table: "demo_calls",
    columns: [],
    freeText: [],
    finders: ["run"],
    tenantColumn: false,
    bundle: "demo_calls",
    erase: "hash",
    retention: "swept with the demo run",
    note: "Demo workspace only. Holds no identifier: its run's targets, calls and turns are erased as their own rows.",
  },
]

/**
 * Tables (and columns) with a phone/email that are NOT a contact's data, and why. The registry test
 * accepts a phone/email column only when it is registered above or listed here.
 */
export const EXCLUDED: readonly {
  readonly table: string
  readonly columns: readonly string[]
  readonly why: string
}[] = [
  {
    table: "users",
    columns: ["email", "email_verified", "email_verified_at"],
    why: "A workspace's own members (operators), not data subjects of a campaign; their data follows the account.",
  },
  { table: "otp_codes", columns: ["email"], why: "Login codes of users (operators), not contacts." },
  {
    table: "ncpr_registry",
    columns: ["phone_e164"],
    why: "India's national register, global and imported as a whole: a public list, not a workspace's record.",
  },
  {
    table: "phone_numbers",
    columns: ["phone_e164"],
    why: "The workspace's own provisioned/imported numbers, not contacts.",
  },
  { table: "inbound_calls", columns: ["to_e164"], why: "The workspace's own number that was called." },
  {
    table: "invitations",
    columns: ["email"],
    why: "Addresses invited to join the workspace's team (operators), not contacts.",
  },
  {
    table: "audit_events",
    columns: ["actor_email"],
    why:
      "Who changed the workspace's team, keys and settings (operators). An erase still scrubs any contact it " +
      "quotes (pseudonymiseAudit, src/audit/audit.repo.ts), so a request body that named a contact keeps no copy.",
  },
]

/** Column names the registry test treats as holding a phone or an email. */
export const IDENTIFIER_COLUMN = /(^|_)(phone|email|e164|msisdn|mobile)(_|$)/
