// The Wallet page: balance and minutes left, the ledger, top-ups and autocharge, all through the
// public billing API. Money moves only when the gateway confirms; this page only starts payments.
// Topping up needs write (owners, admins), autocharge admin (it spends from the saved card); other
// roles read the balance, the autocharge setting and the history.
import "./account.css"
import { useState } from "preact/hooks"
import { useAccess } from "../access.js"
import { ApiError, request } from "../api.js"
import { Button, ErrorText, Field, money, Table, useLoad } from "../ui.js"
import { ledgerKindWords } from "../words.js"

interface Wallet {
  readonly currency: "INR" | "USD"
  readonly balance_minor: number
  readonly plan_tier: string
  readonly trial_expires_at: string | null
  readonly minutes_remaining_at_bundled_rate: number
  readonly rate_per_minute_minor: number
  readonly autocharge: {
    readonly enabled: boolean
    readonly threshold_minor: number | null
    readonly amount_minor: number | null
  }
  readonly topup_presets_minor: ReadonlyArray<number>
}

interface Entry {
  readonly id: number
  readonly amount_minor: number
  readonly kind: string
  readonly reference: string | null
  readonly balance_after_minor: number
  readonly created_at: string
}

interface HistoryPage {
  readonly entries: ReadonlyArray<Entry>
  /** The cursor for the next (older) page; null on the last one. */
  readonly next_before: number | null
}

const PAGE = 50

interface Intent {
  readonly intent_id: number
  readonly amount_minor: number
  readonly currency: string
  readonly status: string
  readonly external_id: string
  readonly checkout_url: string | null
  readonly gateway: string
}

interface PaymentMethod {
  readonly id: number
  readonly gateway: string
  readonly display_hint: string | null
}

/** "12.50" in major units → 1250 minor units; undefined for anything that is not a plain amount. */
function toMinor(text: string): number | undefined {
  const m = /^\s*(\d{1,7})(?:\.(\d{1,2}))?\s*$/.exec(text)
  if (m === null) return undefined
  return Number(m[1]) * 100 + Number((m[2] ?? "").padEnd(2, "0"))
}

const majorText = (minor: number | null) => (minor === null ? "" : (minor / 100).toFixed(2))

const when = (iso: string) => new Date(iso).toLocaleString()

export function WalletPage() {
  const wallet = useLoad(() => request<Wallet>("GET", "/billing/balance"))
  const history = useLoad(() => request<HistoryPage>("GET", `/billing/history?limit=${PAGE}`))
  const methods = useLoad(() => request<{ payment_methods: PaymentMethod[] }>("GET", "/billing/payment-methods"))
  // Pages past the first, fetched on request and dropped whenever the first page is read again.
  const [older, setOlder] = useState<HistoryPage | undefined>(undefined)
  const [olderError, setOlderError] = useState<unknown>(undefined)
  const reload = () => {
    wallet.reload()
    history.reload()
    methods.reload()
    setOlder(undefined)
  }
  const { can } = useAccess()
  const nextBefore = older !== undefined ? older.next_before : (history.data?.next_before ?? null)
  const loadOlder = () => {
    if (nextBefore === null) return
    request<HistoryPage>("GET", `/billing/history?limit=${PAGE}&before=${nextBefore}`).then(
      (p) => {
        setOlder((o) => ({ entries: [...(o?.entries ?? []), ...p.entries], next_before: p.next_before }))
        setOlderError(undefined)
      },
      (e: unknown) => setOlderError(e),
    )
  }
  const w = wallet.data
  return (
    <section aria-labelledby="wallet-h">
      <h1 id="wallet-h">Wallet</h1>
      <ErrorText error={wallet.error} />
      {w && (
        <div class="cards">
          <div class="panel">
            <h2>Balance</h2>
            <p class="figure" data-testid="balance">
              {money(w.balance_minor, w.currency)}
            </p>
            <p class="muted">
              About {w.minutes_remaining_at_bundled_rate.toLocaleString()} minutes of calls at{" "}
              {money(w.rate_per_minute_minor, w.currency)} a minute.
              {w.trial_expires_at && ` Trial until ${when(w.trial_expires_at)}.`}
            </p>
          </div>
          {can("write") && <TopUp wallet={w} onSettled={reload} />}
          {can("admin") ? (
            <Autocharge wallet={w} methods={methods.data?.payment_methods ?? []} onSaved={wallet.reload} />
          ) : (
            <AutochargeState wallet={w} />
          )}
        </div>
      )}
      <h2>History</h2>
      <ErrorText error={history.error} />
      {history.data && w && (
        <Table
          caption="Wallet history, newest first"
          rows={[...history.data.entries, ...(older?.entries ?? [])]}
          rowKey={(e) => e.id}
          empty="No payments or charges yet."
          columns={[
            { title: "When", cell: (e) => when(e.created_at) },
            { title: "What", cell: (e) => ledgerKindWords(e.kind) },
            {
              title: "Amount",
              cell: (e) => (
                <span class={e.amount_minor < 0 ? "debit" : "credit"}>
                  {e.amount_minor > 0 ? "+" : ""}
                  {money(e.amount_minor, w.currency)}
                </span>
              ),
            },
            { title: "Balance after", cell: (e) => money(e.balance_after_minor, w.currency) },
            { title: "Reference", cell: (e) => e.reference ?? "" },
          ]}
        />
      )}
      {nextBefore !== null && <Button onClick={loadOlder}>Show older entries</Button>}
      <ErrorText error={olderError} />
    </section>
  )
}

function TopUp({ wallet, onSettled }: { readonly wallet: Wallet; readonly onSettled: () => void }) {
  const [amount, setAmount] = useState(majorText(wallet.topup_presets_minor[0] ?? 1000))
  const [save, setSave] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [fieldError, setFieldError] = useState<string | undefined>(undefined)
  const [pending, setPending] = useState<Intent | undefined>(undefined)
  const [notice, setNotice] = useState<string | undefined>(undefined)

  const start = async (e: Event) => {
    e.preventDefault()
    const minor = toMinor(amount)
    if (minor === undefined || minor < 1) {
      setFieldError("Enter an amount such as 25 or 25.50.")
      return
    }
    setFieldError(undefined)
    setError(undefined)
    setNotice(undefined)
    setBusy(true)
    try {
      const intent = await request<Intent>("POST", "/billing/topup", {
        amount_minor: minor,
        save_payment_method: save,
        return_url: `${location.origin}/console#/wallet`,
      })
      // The stub gateway has no checkout of its own: the payment is settled here, the way its
      // webhook is meant to be driven. A real gateway takes the payer to its checkout page.
      if (intent.gateway === "stub" || intent.checkout_url === null) setPending(intent)
      else location.assign(intent.checkout_url)
    } catch (err) {
      if (err instanceof ApiError && err.fieldError("amount_minor") !== undefined)
        setFieldError(err.fieldError("amount_minor"))
      else setError(err)
    } finally {
      setBusy(false)
    }
  }

  const settle = async (status: "succeeded" | "failed") => {
    if (pending === undefined) return
    setBusy(true)
    setError(undefined)
    try {
      await request("POST", "/billing/webhooks/stub", { external_id: pending.external_id, status })
      setNotice(
        status === "succeeded"
          ? `Payment of ${money(pending.amount_minor, wallet.currency)} completed; the wallet is credited.`
          : "The payment was marked failed; nothing was charged.",
      )
      setPending(undefined)
      onSettled()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  return (
    <div class="panel">
      <h2>Top up</h2>
      {pending === undefined ? (
        <form onSubmit={start}>
          <fieldset class="presets">
            <legend class="visually-hidden">Preset amounts</legend>
            {wallet.topup_presets_minor.map((p) => (
              <Button key={p} onClick={() => setAmount(majorText(p))} aria-pressed={toMinor(amount) === p}>
                {money(p, wallet.currency)}
              </Button>
            ))}
          </fieldset>
          <Field label={`Amount (${wallet.currency})`} error={fieldError}>
            {(id, describedBy) => (
              <input
                id={id}
                inputMode="decimal"
                value={amount}
                aria-describedby={describedBy}
                aria-invalid={fieldError !== undefined}
                onInput={(e) => setAmount(e.currentTarget.value)}
              />
            )}
          </Field>
          <label class="check">
            <input type="checkbox" checked={save} onChange={(e) => setSave(e.currentTarget.checked)} /> Save the payment
            method for autocharge
          </label>
          <Button kind="primary" type="submit" busy={busy}>
            Top up
          </Button>
        </form>
      ) : (
        <section class="stub-payment" aria-label="Test payment">
          <p>
            Test payment #{pending.intent_id} of <strong>{money(pending.amount_minor, wallet.currency)}</strong> is
            pending. This server runs the stub gateway (no real money): complete or fail it here.
          </p>
          <Button kind="primary" busy={busy} onClick={() => settle("succeeded")}>
            Complete payment
          </Button>{" "}
          <Button busy={busy} onClick={() => settle("failed")}>
            Fail payment
          </Button>
        </section>
      )}
      {notice && (
        <p class="ok" role="status">
          {notice}
        </p>
      )}
      <ErrorText error={error} />
    </div>
  )
}

/** The autocharge setting, read only (changing it is an owner's or admin's). */
function AutochargeState({ wallet }: { readonly wallet: Wallet }) {
  const a = wallet.autocharge
  return (
    <div class="panel">
      <h2>Autocharge</h2>
      <p>
        {a.enabled && a.threshold_minor !== null && a.amount_minor !== null
          ? `On: adds ${money(a.amount_minor, wallet.currency)} when the balance falls under ` +
            `${money(a.threshold_minor, wallet.currency)}.`
          : "Off."}
      </p>
      <p class="muted">Owners and admins top up the wallet and change autocharge.</p>
    </div>
  )
}

function Autocharge({
  wallet,
  methods,
  onSaved,
}: {
  readonly wallet: Wallet
  readonly methods: ReadonlyArray<PaymentMethod>
  readonly onSaved: () => void
}) {
  const a = wallet.autocharge
  const [enabled, setEnabled] = useState(a.enabled)
  const [threshold, setThreshold] = useState(majorText(a.threshold_minor))
  const [amount, setAmount] = useState(majorText(a.amount_minor))
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [fields, setFields] = useState<Record<string, string>>({})
  const [saved, setSaved] = useState(false)

  const submit = async (e: Event) => {
    e.preventDefault()
    setSaved(false)
    setError(undefined)
    const t = threshold.trim() === "" ? null : toMinor(threshold)
    const m = amount.trim() === "" ? null : toMinor(amount)
    const bad: Record<string, string> = {}
    if (t === undefined) bad["threshold_minor"] = "Enter an amount such as 10 or 10.50."
    if (m === undefined) bad["amount_minor"] = "Enter an amount such as 50 or 50.50."
    if (enabled && t === null) bad["threshold_minor"] = "Needed to turn autocharge on."
    if (enabled && m === null) bad["amount_minor"] = "Needed to turn autocharge on."
    setFields(bad)
    if (Object.keys(bad).length > 0) return
    setBusy(true)
    try {
      await request("PUT", "/billing/autocharge", { enabled, threshold_minor: t, amount_minor: m })
      setSaved(true)
      onSaved()
    } catch (err) {
      if (err instanceof ApiError && err.field !== undefined)
        setFields(Object.fromEntries([[err.field, err.message], ...err.errors.map((f) => [f.field, f.message])]))
      else setError(err)
    } finally {
      setBusy(false)
    }
  }

  return (
    <form class="panel" onSubmit={submit} aria-labelledby="autocharge-h">
      <h2 id="autocharge-h">Autocharge</h2>
      <p class="muted">
        {methods.length === 0
          ? "No saved payment method yet: top up with “Save the payment method” first."
          : `Charges ${methods.map((m) => m.display_hint ?? m.gateway).join(", ")} when the balance falls under the threshold.`}
      </p>
      <label class="check">
        <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Autocharge
        enabled
      </label>
      <Field label={`When the balance falls under (${wallet.currency})`} error={fields["threshold_minor"]}>
        {(id, describedBy) => (
          <input
            id={id}
            inputMode="decimal"
            value={threshold}
            aria-describedby={describedBy}
            onInput={(e) => setThreshold(e.currentTarget.value)}
          />
        )}
      </Field>
      <Field label={`Add (${wallet.currency})`} error={fields["amount_minor"]}>
        {(id, describedBy) => (
          <input
            id={id}
            inputMode="decimal"
            value={amount}
            aria-describedby={describedBy}
            onInput={(e) => setAmount(e.currentTarget.value)}
          />
        )}
      </Field>
      <Button kind="primary" type="submit" busy={busy}>
        Save autocharge
      </Button>
      {saved && (
        <p class="ok" role="status">
          Autocharge saved.
        </p>
      )}
      <ErrorText error={error} />
    </form>
  )
}
