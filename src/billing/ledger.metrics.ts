// The ledger's metrics: posts by outcome.
import { Counter } from "prom-client"
import { registers } from "../platform/metrics.js"

export const ledgerPosts = new Counter({
  name: "parley_ledger_posts_total",
  help: "Ledger posts by outcome (posted, replayed, insufficient_funds), rolled-back ones included",
  labelNames: ["outcome"] as const,
  registers,
})
for (const outcome of ["posted", "replayed", "insufficient_funds"]) ledgerPosts.inc({ outcome }, 0)
