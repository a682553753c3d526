// SQL for usage reservations: the cost held for one call before it is dialed, settled at hangup.
import type { Tx } from "../platform/Db.js"

export interface Reservation {
  readonly call_ref: string
  readonly reserved_minor: number
  readonly status: "reserved" | "settled" | "released"
  readonly settled_minor: number | null
}

export const findReservation = async (tx: Tx, callRef: string): Promise<Reservation | undefined> => {
  const [row] = await tx<
    [Reservation?]
  >`select call_ref, reserved_minor, status, settled_minor from usage_reservations where call_ref = ${callRef}`
  return row
}

export const insertReservation = async (
  tx: Tx,
  tenantId: number,
  callRef: string,
  reservedMinor: number,
): Promise<Reservation> => {
  const [row] = await tx<[Reservation]>`
    insert into usage_reservations (tenant_id, call_ref, reserved_minor) values (${tenantId}, ${callRef},
      ${reservedMinor})
    returning call_ref, reserved_minor, status, settled_minor`
  return row
}

/** The reservation with its workspace, locked for the rest of the transaction. */
export const lockReservation = async (
  tx: Tx,
  callRef: string,
): Promise<(Reservation & { tenant_id: number }) | undefined> => {
  const [row] = await tx<[(Reservation & { tenant_id: number })?]>`
    select tenant_id, call_ref, reserved_minor, status, settled_minor from usage_reservations
      where call_ref = ${callRef} for update`
  return row
}

export const markSettled = async (
  tx: Tx,
  callRef: string,
  status: Reservation["status"],
  settledMinor: number,
): Promise<void> => {
  await tx`update usage_reservations set status = ${status}, settled_minor = ${settledMinor}, settled_at = now()
    where call_ref = ${callRef}`
}
