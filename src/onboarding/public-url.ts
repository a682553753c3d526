// Whether a URL a tenant gave us points at the public internet, checked when the credential is
// saved. Calls are checked again when they connect (src/providers/outbound.ts), where the address
// classification and the resolver live, since DNS may answer differently by then.
import { isPrivateAddress, resolveHost } from "../providers/outbound.js"

export { isPrivateAddress }

/** undefined when every address the URL's host resolves to is public; else why not. */
export async function privateUrlReason(url: string): Promise<string | undefined> {
  let host: string
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, "")
  } catch {
    return "is not a URL"
  }
  const addresses = await resolveHost(host)
  if (addresses.length === 0) return `names a host that does not resolve (${host})`
  const inner = addresses.find(isPrivateAddress)
  // The host it gave, never the address it resolved to: a workspace does not learn internal DNS answers.
  if (inner === undefined) return undefined
  return inner === host ? "must be a public address" : `must be a public address; ${host} resolves to a non-public one`
}
