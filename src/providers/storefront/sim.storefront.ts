// The storefront simulator: a demo shop that approves every install at once (its authorize URL
// points straight back at our callback, signed with the simulator's own secret) and has 200
// generated customers, the same on every run.
import { createHash, randomBytes } from "node:crypto"
import {
  STOREFRONT_SCOPES,
  type StorefrontAdapter,
  type StorefrontCustomer,
  StorefrontRefused,
  signQuery,
} from "./storefront.interface.js"

/** The secret the simulated platform signs its redirects with (public: it protects nothing real). */
export const SIM_SIGNING_SECRET = "parley-storefront-simulator"
export const DEMO_CUSTOMER_COUNT = 200
const SIM_CODE = /^demo-[0-9a-f]{16,64}$/
const SIM_TOKEN_PREFIX = "simtok_"

const FIRST = [
  "Aarav",
  "Priya",
  "Rohan",
  "Ananya",
  "Vikram",
  "Meera",
  "Arjun",
  "Kavya",
  "Ishaan",
  "Diya",
  "James",
  "Olivia",
  "Liam",
  "Emma",
  "Noah",
  "Ava",
  "Oliver",
  "Mia",
  "Jack",
  "Sophie",
]
const LAST = [
  "Sharma",
  "Patel",
  "Iyer",
  "Reddy",
  "Gupta",
  "Nair",
  "Khan",
  "Singh",
  "Das",
  "Mehta",
  "Smith",
  "Johnson",
  "Brown",
  "Taylor",
  "Wilson",
  "Davies",
  "Evans",
  "Clark",
  "Lewis",
  "Walker",
]
// Countries with their cities, currency, and how a valid mobile number is made from 7 digits.
const PLACES = [
  { country: "IN", currency: "INR", cities: ["Mumbai", "Bengaluru", "Delhi", "Pune", "Chennai"], prefix: "+91981" },
  { country: "IN", currency: "INR", cities: ["Hyderabad", "Kolkata", "Jaipur"], prefix: "+91812" },
  { country: "US", currency: "USD", cities: ["San Francisco", "Oakland"], prefix: "+1415234" },
  { country: "US", currency: "USD", cities: ["New York", "Brooklyn"], prefix: "+1212819" },
  { country: "GB", currency: "GBP", cities: ["London", "Manchester", "Leeds"], prefix: "+447712" },
] as const

// mulberry32: a small seeded generator, so the demo shop is the same everywhere.
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

let demo: ReadonlyArray<StorefrontCustomer> | undefined

/**
 * The demo shop's customers. Every 25th (from the 8th) has a malformed phone and every 40th (from
 * the 14th) none; the rest have valid E.164 mobiles. Ids, names, cities, orders and spend vary.
 */
export function demoCustomers(): ReadonlyArray<StorefrontCustomer> {
  if (demo !== undefined) return demo
  const rnd = prng(18)
  const pick = <T>(xs: ReadonlyArray<T>): T => xs[Math.floor(rnd() * xs.length)]!
  const out: StorefrontCustomer[] = []
  for (let i = 0; i < DEMO_CUSTOMER_COUNT; i++) {
    const first = pick(FIRST)
    const last = pick(LAST)
    const place = pick(PLACES)
    const digits = String(Math.floor(rnd() * 10_000_000)).padStart(7, "0")
    // Every number here is 13 characters (+91…, +44…) or 12 (+1…).
    const validLen = (place.prefix.startsWith("+1") ? 12 : 13) - place.prefix.length
    const phone =
      i % 40 === 13
        ? null
        : i % 25 === 7
          ? `${place.prefix.slice(0, 4)}${digits.slice(0, 3)}`
          : place.prefix + digits.slice(0, validLen)
    const orders = Math.floor(rnd() * rnd() * 30)
    const unit = place.currency === "INR" ? 1800 : 45
    const spent = orders === 0 ? 0 : Math.round(orders * unit * (0.5 + rnd()) * 100) / 100
    out.push({
      customer_id: 7_000_001 + i,
      name: `${first} ${last}`,
      first_name: first,
      last_name: last,
      email: i % 50 === 21 ? null : `${first}.${last}${i}@example.com`.toLowerCase(),
      phone,
      city: pick(place.cities),
      country: place.country,
      orders_count: orders,
      total_spent: spent,
      currency: place.currency,
    })
  }
  demo = out
  return demo
}

export function makeSimStorefront(): StorefrontAdapter {
  return {
    mode: "simulator",
    signingSecret: SIM_SIGNING_SECRET,
    authorizeUrl({ shop, state, redirectUri }) {
      // The demo merchant approves at once: the platform's redirect back, signed as the platform signs it.
      const q = new URLSearchParams({
        code: `demo-${randomBytes(16).toString("hex")}`,
        shop,
        state,
        timestamp: String(Math.floor(Date.now() / 1000)),
      })
      q.set("hmac", signQuery(q, SIM_SIGNING_SECRET))
      return `${redirectUri}?${q.toString()}`
    },
    async exchangeCode(shop, code) {
      if (!SIM_CODE.test(code)) throw new StorefrontRefused("the demo shop did not issue this code")
      const token = createHash("sha256").update(`${shop}\0${code}`).digest("hex")
      return { accessToken: SIM_TOKEN_PREFIX + token, scopes: [...STOREFRONT_SCOPES] }
    },
    async customers(_shop, accessToken) {
      if (!accessToken.startsWith(SIM_TOKEN_PREFIX))
        throw new StorefrontRefused("the demo shop does not know this token")
      return [...demoCustomers()]
    },
  }
}
