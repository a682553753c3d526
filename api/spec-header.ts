// The spec names several webhook headers with underscores (gw_card-Signature, X-gw_upi-Signature,
// X-gw_upi-Event-Id, X-mail_b-Signature, X-telco_a-Signature, X-telco_b-Signature). The engine
// reads them as sent; a proxy in front may forward them hyphenated instead (deploy/nginx.conf does,
// so exactly one spelling arrives), and both are accepted.

/** The value of the header the spec spells `name` (lower case), or of its hyphenated form. */
export const specHeader = (headers: Readonly<Record<string, string>>, name: string): string | undefined =>
  headers[name] ?? headers[name.replace(/_/g, "-")]
