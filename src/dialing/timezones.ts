// Which time zones a callee may be in, from the number (country, NANP area code, Australian
// prefix), and each zone's UTC offset at an instant, DST-correct through Intl. Pure: time comes in.
import { parsePhoneNumberFromString } from "libphonenumber-js/max"

export const MINUTE = 60_000
export const HOUR = 60 * MINUTE
export const DAY = 24 * HOUR

/** Used when neither the number nor the workflow names a zone. */
export const DEFAULT_FALLBACK_TZ = "UTC"

// ---------------------------------------------------------------------------------------------
// Time zones, DST-correct through Intl (no tz library)

const formatters = new Map<string, Intl.DateTimeFormat | null>()

function formatter(tz: string): Intl.DateTimeFormat | null {
  let f = formatters.get(tz)
  if (f === undefined) {
    try {
      f = new Intl.DateTimeFormat("en-US", {
        timeZone: tz,
        hourCycle: "h23",
        year: "numeric",
        month: "numeric",
        day: "numeric",
        hour: "numeric",
        minute: "numeric",
        second: "numeric",
      })
    } catch {
      f = null
    }
    formatters.set(tz, f)
  }
  return f
}

/** Whether this runtime's ICU knows the zone (tables may name zones an older ICU lacks). */
export const isKnownTimeZone = (tz: string): boolean => formatter(tz) !== null

export const mod = (a: number, n: number): number => ((a % n) + n) % n

function computeOffset(tz: string, t: number): number {
  const f = formatter(tz)
  if (f === null) throw new RangeError(`unknown time zone ${tz}`)
  const whole = t - mod(t, 1000)
  let y = 1970
  let mo = 1
  let d = 1
  let h = 0
  let mi = 0
  let s = 0
  for (const p of f.formatToParts(whole)) {
    switch (p.type) {
      case "year":
        y = Number(p.value)
        break
      case "month":
        mo = Number(p.value)
        break
      case "day":
        d = Number(p.value)
        break
      case "hour":
        h = Number(p.value)
        break
      case "minute":
        mi = Number(p.value)
        break
      case "second":
        s = Number(p.value)
        break
      default:
        break
    }
  }
  return Date.UTC(y, mo - 1, d, h, mi, s) - whole
}

// Offsets per zone per UTC hour: formatToParts costs ~3 µs and a search asks for the same hours
// again and again. An hour is cached only when both its ends agree (no transition inside it).
const offsetCache = new Map<string, Map<number, number>>()
let offsetCacheSize = 0

/** The zone's offset from UTC at instant `t`, in ms (local wall clock = t + offset). */
export function zoneOffsetMs(tz: string, t: number): number {
  const hour = Math.floor(t / HOUR)
  let byHour = offsetCache.get(tz)
  const hit = byHour?.get(hour)
  if (hit !== undefined) return hit
  const a = computeOffset(tz, hour * HOUR)
  const b = computeOffset(tz, hour * HOUR + HOUR - 1)
  if (a !== b) return computeOffset(tz, t)
  if (offsetCacheSize > 200_000) {
    offsetCache.clear()
    offsetCacheSize = 0
  }
  if (byHour === undefined) {
    byHour = new Map()
    offsetCache.set(tz, byHour)
  }
  byHour.set(hour, a)
  offsetCacheSize++
  return a
}

// ---------------------------------------------------------------------------------------------
// Callee time zones

const NY = "America/New_York"
const CHI = "America/Chicago"
const DEN = "America/Denver"
const PHX = "America/Phoenix"
const LA = "America/Los_Angeles"
const ANC = "America/Anchorage"
const HNL = "Pacific/Honolulu"
const HAL = "America/Halifax"
const TOR = "America/Toronto"
const WPG = "America/Winnipeg"
const REG = "America/Regina"
const EDM = "America/Edmonton"
const VAN = "America/Vancouver"
const STJ = "America/St_Johns"

/** Zones of the countries that span several, listed by their main zones. */
const MULTI_ZONE: Readonly<Record<string, readonly string[]>> = {
  US: [NY, CHI, DEN, PHX, LA, ANC, HNL],
  CA: [STJ, HAL, TOR, WPG, REG, EDM, VAN],
  AU: ["Australia/Sydney", "Australia/Brisbane", "Australia/Adelaide", "Australia/Darwin", "Australia/Perth"],
  NZ: ["Pacific/Auckland", "Pacific/Chatham"],
  ES: ["Europe/Madrid", "Atlantic/Canary"],
  PT: ["Europe/Lisbon", "Atlantic/Azores"],
  EC: ["America/Guayaquil", "Pacific/Galapagos"],
  ID: ["Asia/Jakarta", "Asia/Makassar", "Asia/Jayapura"],
  // RU, BR, MX, KZ, CL, … come from ICU's own per-region lists (regionZones below).
}

/** Countries in one zone, for the regions callers most often dial (others: ICU's list). */
const SINGLE_ZONE: Readonly<Record<string, string>> = {
  IN: "Asia/Kolkata",
  GB: "Europe/London",
  IE: "Europe/Dublin",
  JE: "Europe/Jersey",
  GG: "Europe/Guernsey",
  IM: "Europe/Isle_of_Man",
  SG: "Asia/Singapore",
  AE: "Asia/Dubai",
  SA: "Asia/Riyadh",
  QA: "Asia/Qatar",
  KW: "Asia/Kuwait",
  BH: "Asia/Bahrain",
  OM: "Asia/Muscat",
  PK: "Asia/Karachi",
  BD: "Asia/Dhaka",
  LK: "Asia/Colombo",
  NP: "Asia/Kathmandu",
  CN: "Asia/Shanghai",
  HK: "Asia/Hong_Kong",
  TW: "Asia/Taipei",
  JP: "Asia/Tokyo",
  KR: "Asia/Seoul",
  PH: "Asia/Manila",
  MY: "Asia/Kuala_Lumpur",
  TH: "Asia/Bangkok",
  VN: "Asia/Ho_Chi_Minh",
  IL: "Asia/Jerusalem",
  TR: "Europe/Istanbul",
  FR: "Europe/Paris",
  DE: "Europe/Berlin",
  IT: "Europe/Rome",
  NL: "Europe/Amsterdam",
  BE: "Europe/Brussels",
  CH: "Europe/Zurich",
  AT: "Europe/Vienna",
  SE: "Europe/Stockholm",
  NO: "Europe/Oslo",
  DK: "Europe/Copenhagen",
  FI: "Europe/Helsinki",
  PL: "Europe/Warsaw",
  CZ: "Europe/Prague",
  GR: "Europe/Athens",
  RO: "Europe/Bucharest",
  HU: "Europe/Budapest",
  UA: "Europe/Kyiv",
  EG: "Africa/Cairo",
  ZA: "Africa/Johannesburg",
  NG: "Africa/Lagos",
  KE: "Africa/Nairobi",
  GH: "Africa/Accra",
  AR: "America/Argentina/Buenos_Aires",
  CO: "America/Bogota",
  PE: "America/Lima",
  // NANP members other than the US and Canada have their own region codes in libphonenumber.
  PR: "America/Puerto_Rico",
  DO: "America/Santo_Domingo",
  JM: "America/Jamaica",
  BS: "America/Nassau",
  TT: "America/Port_of_Spain",
  BB: "America/Barbados",
  BM: "Atlantic/Bermuda",
  KY: "America/Cayman",
  VI: "America/St_Thomas",
  GU: "Pacific/Guam",
  MP: "Pacific/Saipan",
  AS: "Pacific/Pago_Pago",
}

/**
 * NANP area codes → zones, for the codes we are sure of. A code whose territory straddles a zone
 * line lists every zone it touches (the window is then checked in all of them); a code missing
 * here means "anywhere in the country". Mobile numbers keep their area code when people move, so
 * this narrows by where the number was issued, which is the industry's (and TCPA safe harbour's)
 * usual reading.
 */
const NANP_AREA_ZONES: ReadonlyArray<readonly [readonly string[], string]> = [
  // US Eastern
  [[NY], "203 475 860 959 302 202 771 239 305 321 324 352 386 407 561 645 656 689 727 754 772 786 813 863 904 941 954"],
  [[NY], "229 404 470 478 678 706 762 770 912 943 260 317 463 765 502 606 859 207 240 301 410 443 667"],
  [[NY], "339 351 413 508 617 774 781 857 978 231 248 269 313 517 586 616 734 810 947 989 603"],
  [
    [NY],
    "201 551 609 640 732 848 856 862 908 973 212 315 332 347 363 516 518 585 607 631 646 680 716 718 838 845 914 " +
      "917 929 934",
  ],
  [[NY], "252 336 704 743 828 910 919 980 984 216 220 234 283 326 330 380 419 440 513 567 614 740 937"],
  [[NY], "215 223 267 272 412 445 484 570 582 610 717 724 814 835 878 401 803 839 843 854 864 865 802"],
  [[NY], "276 434 540 571 703 757 804 826 948 304 681"],
  // US Eastern/Central straddles: FL panhandle, IN, KY, MI upper peninsula, TN, AL (Phenix City)
  [[CHI, NY], "850 448 574 812 930 270 364 906 423 931 334"],
  // US Central
  [[CHI], "205 251 256 659 938 327 479 501 870 217 224 309 312 331 447 464 618 630 708 730 773 779 815 847 872 219"],
  [[CHI], "319 515 563 641 712 316 913 225 318 337 504 985 218 320 507 612 651 763 952 228 601 662 769"],
  [[CHI], "314 417 557 573 636 660 816 975 402 531 405 539 572 580 918 615 629 731 901 262 274 414 534 608 715 920"],
  [[CHI], "210 214 254 281 325 346 361 409 430 469 512 682 713 726 737 806 817 830 832 903 936 940 945 956 972 979"],
  // US Central/Mountain straddles: KS, NE, ND, SD, west Texas
  [[CHI, DEN], "620 785 308 701 605 432"],
  // US Mountain, Arizona (no DST, except the Navajo Nation in 928)
  [[DEN], "303 719 720 970 983 406 505 575 385 435 801 307 915"],
  [[DEN, LA], "208 986 458 541 775"],
  [[PHX], "480 520 602 623"],
  [[PHX, DEN], "928"],
  // US Pacific, Alaska, Hawaii
  [[LA], "209 213 279 310 323 341 350 408 415 424 442 510 530 559 562 619 626 628 650 657 661 669 707 714 747"],
  [[LA], "760 805 818 820 831 840 858 909 916 925 949 951 702 725 503 971 206 253 360 425 509 564"],
  [[ANC], "907"],
  [[HNL], "808"],
  // Canada
  [
    [TOR],
    "226 249 289 343 365 382 416 437 519 548 613 647 683 705 742 753 905 942 263 354 438 450 468 514 579 819 873",
  ],
  [[TOR, HAL], "367 418 581"],
  [[TOR, WPG], "807"],
  [[WPG], "204 431 584"],
  [[REG, EDM], "306 474 639"],
  [[EDM], "368 403 587 780 825"],
  [[VAN], "604"],
  [[VAN, EDM], "236 250 257 672 778"],
  [[HAL], "506 428 782 902"],
  [[STJ, HAL], "709 879"],
  [["America/Whitehorse", EDM, WPG, TOR], "867"],
]

const AREA_ZONES: ReadonlyMap<string, readonly string[]> = (() => {
  const m = new Map<string, readonly string[]>()
  for (const [zones, codes] of NANP_AREA_ZONES) for (const code of codes.split(" ")) m.set(code, zones)
  return m
})()

/** Australian geographic numbers by their first national digit; mobiles (4) and 1300/1800 are anywhere. */
const AU_PREFIX_ZONES: Readonly<Record<string, readonly string[]>> = {
  "2": ["Australia/Sydney"],
  "3": ["Australia/Melbourne"],
  "7": ["Australia/Brisbane"],
  "8": ["Australia/Adelaide", "Australia/Darwin", "Australia/Perth"],
}

/** ICU's own list of a region's zones (CLDR), for countries the tables above leave out. */
function regionZones(country: string): readonly string[] {
  try {
    const locale = new Intl.Locale(`und-${country}`) as Intl.Locale & {
      timeZones?: readonly string[]
      getTimeZones?: () => readonly string[]
    }
    return locale.getTimeZones?.() ?? locale.timeZones ?? []
  } catch {
    return []
  }
}

function countryZones(country: string, nationalNumber: string): readonly string[] {
  if (country === "US" || country === "CA") {
    const byArea = AREA_ZONES.get(nationalNumber.slice(0, 3))
    if (byArea !== undefined) return byArea
  }
  if (country === "AU") {
    const byPrefix = AU_PREFIX_ZONES[nationalNumber.slice(0, 1)]
    if (byPrefix !== undefined) return byPrefix
  }
  const single = SINGLE_ZONE[country]
  if (single !== undefined) return [single]
  return MULTI_ZONE[country] ?? regionZones(country)
}

/**
 * The IANA zones the callee may be in, judged from the number's country (and, for NANP and
 * Australian numbers, its area code). A number with no country (unparsable, non-geographic
 * +800, an unassigned NANP code) is placed in `fallbackTz`, except that any +1 number is at least
 * somewhere in the US or Canada.
 */
export function calleeTimeZones(phoneE164: string, fallbackTz: string = DEFAULT_FALLBACK_TZ): string[] {
  const p = parsePhoneNumberFromString(phoneE164)
  let zones: readonly string[] = []
  if (p?.country !== undefined) zones = countryZones(p.country, p.nationalNumber)
  else if (p?.countryCallingCode === "1") zones = [...(MULTI_ZONE.US ?? []), ...(MULTI_ZONE.CA ?? [])]
  const known = [...new Set(zones)].filter(isKnownTimeZone)
  return known.length > 0 ? known : [fallbackTz]
}
