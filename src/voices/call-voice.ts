// The voice a workflow's calls speak with: its own cloned voice, else its persona's (a cloned voice
// or a catalogue voice), as previews render it (previews.service.ts speakerOf) — the same order.
import type { Sql } from "../platform/Db.js"
import { clonedSpeechVoice, type SpeechVoice } from "../providers/speech/speech.interface.js"
import { workflowVoice } from "./avatars.repo.js"
import { findVoice, VOICES } from "./voices.catalog.js"

export async function callVoice(sql: Sql, tenantId: number, workflowId: number): Promise<SpeechVoice> {
  const wf = await workflowVoice(sql, tenantId, workflowId)
  const persona = findVoice(wf?.persona ?? "") ?? VOICES[0]!
  const avatar = wf?.avatar ?? null
  return avatar === null ? persona.speech : clonedSpeechVoice(avatar.params, persona.language, avatar.provider_voice_id)
}
