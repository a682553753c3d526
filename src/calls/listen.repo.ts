// What listening in on a call reads (GET /api/calls/{call_id}/listen): whether the call is the
// workspace's, whether it is still live, and whether it is heard as audio (a media stream was asked for).
import type { Sql } from "../platform/Db.js"

export interface HeardCall {
  readonly status: "dialing" | "connected" | "ended"
  /**
   * The time scale of the call's media stream (1: real time; a simulated call's may be faster), from
   * the newest token minted for it; null when none was: the call is not heard as audio.
   */
  readonly timeScale: number | null
}

/** The workspace's call with its media stream's time scale; undefined for an unknown or another's call. */
export async function heardCall(sql: Sql, tenantId: number, callId: number): Promise<HeardCall | undefined> {
  const [row] = await sql<[{ status: HeardCall["status"]; time_scale: number | null }?]>`
    select c.status,
      (select m.time_scale from media_stream_tokens m
        where m.call_id = c.id and m.tenant_id = c.tenant_id order by m.id desc limit 1) as time_scale
    from calls c
    where c.id = ${callId} and c.tenant_id = ${tenantId}`
  if (row === undefined) return undefined
  return { status: row.status, timeScale: row.time_scale === null ? null : Number(row.time_scale) }
}

/** Whether the call is over (or gone): a room whose audio fell quiet asks this. */
export async function callOver(sql: Sql, tenantId: number, callId: number): Promise<boolean> {
  const [row] = await sql<[{ status: string }?]>`
    select status from calls where id = ${callId} and tenant_id = ${tenantId}`
  return row === undefined || row.status === "ended"
}
