// The voice a workflow's calls speak with: its own cloned voice, else its persona's (a cloned voice
// or a catalogue voice), as previews render it (previews.service.ts speakerOf) — the same order.
import type { Sql } from "../platform/Db.js"
import { clonedSpeechVoice, type SpeechVoice } from "../providers/speech/speech.interface.js"
import { findAvatar, workflowVoice } from "./avatars.repo.js"
import { findVoice, VOICES } from "./voices.catalog.js"

export async function callVoice(sql: Sql, tenantId: number, workflowId: number): Promise<SpeechVoice> {
  const wf = await workflowVoice(sql, tenantId, workflowId)
  const persona = findVoice(wf?.persona ?? "") ?? VOICES[0]!
  const avatar = wf?.avatar ?? null
  return avatar === null ? persona.speech : clonedSpeechVoice(avatar.params, persona.language, avatar.provider_voice_id)
}

/**
 * An experiment arm's voice: one of the workspace's cloned voices speaking the persona's language, else
 * the persona's catalogue voice; undefined when the cloned voice is gone (the caller's voice speaks).
 */
export async function armVoice(
  sql: Sql,
  tenantId: number,
  arm: { persona: string; voice: number | null },
): Promise<SpeechVoice | undefined> {
  const persona = findVoice(arm.persona) ?? VOICES[0]!
  if (arm.voice === null) return persona.speech
  const avatar = await findAvatar(sql, tenantId, arm.voice)
  return avatar === undefined ? undefined : clonedSpeechVoice(avatar.params, persona.language, avatar.provider_voice_id)
}
