-- Webhook delivery fairness (src/webhooks/outbox.repo.ts, claimDueDeliveries).
-- A claim caps the deliveries the claiming process has in flight per endpoint and per workspace, so
-- receivers that hang cannot hold every slot of a runtime process. It walks the endpoints with
-- sendable deliveries (a skip scan of this index, one probe per endpoint, whatever each one's
-- backlog) and takes each endpoint's oldest due ones from the same index.
create index webhook_deliveries_waiting_idx on webhook_deliveries (endpoint_id, next_attempt_at)
  where status = 'pending' and next_attempt_at is not null;
-- The leases still running (locked_until is cleared when an attempt is recorded): what each endpoint
-- and workspace has in flight from a process, read without visiting the queue.
create index webhook_deliveries_leased_idx on webhook_deliveries (locked_until)
  include (endpoint_id, tenant_id, locked_by) where locked_until is not null;
