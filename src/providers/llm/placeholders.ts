// The rule book's placeholders ({name}, {agent_name}, {company}) filled for one call: shared by the
// agent loop, the adapters and the knowledge-base rules (src/kb/rule-matching.ts), so it stands alone.

/**
 * `text` with the rule book's placeholders filled for one call. Without a callee name the
 * placeholder goes with its comma ("Hello {name}, this is" → "Hello, this is"), so nothing reads
 * "Hello there" to someone whose name we do not know.
 */
export function fillPlaceholders(text: string, v: { name: string | null; agentName: string; company: string }): string {
  const name = v.name?.trim() ?? ""
  let out = text
  if (name === "") out = out.replace(/,\s*\{name\}(?=[\s.,!?;:]|$)/g, "").replace(/\s*\{name\}/g, "")
  return out.replace(/\{(name|agent_name|company)\}/g, (_, key: string) =>
    key === "name" ? name : key === "agent_name" ? v.agentName : v.company,
  )
}
