-- Webhook delivery, fairness and wake-ups (src/webhooks/outbox.repo.ts, claimDueDeliveries).
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

-- tenant.suspended (0036) made its deliveries due without the NOTIFY every other emit sends
-- (outbox.repo.ts): they waited for the poll. The same function, now waking the workers at commit
-- when the suspension made a delivery.
create or replace function webhook_tenant_suspended() returns trigger language plpgsql as $$
declare
  ev_id text := 'evt_' || md5(random()::text || clock_timestamp()::text || new.id::text);
  at_text text := to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
  made integer;
begin
  insert into webhook_events (id, tenant_id, type, body, created_at)
  values (ev_id, new.id, 'tenant.suspended',
    jsonb_build_object('id', ev_id, 'type', 'tenant.suspended', 'created_at', at_text, 'tenant_id', new.id,
      'data', jsonb_build_object('id', new.id, 'tenant_id', new.id, 'name', new.name, 'status', new.status,
        'previous_status', old.status, 'plan_tier', new.plan_tier, 'currency', new.currency,
        'suspended_at', at_text, 'version', (extract(epoch from now()) * 1000)::bigint)),
    now());
  insert into webhook_deliveries (tenant_id, event_id, endpoint_id, next_attempt_at)
  select new.id, ev_id, ep.id, now()
  from webhook_endpoints ep
  where ep.tenant_id = new.id and ep.enabled and ep.deleted_at is null
    and (ep.events @> array['tenant.suspended'] or ep.events @> array['*']);
  get diagnostics made = row_count;
  if made > 0 then
    perform pg_notify('parley_webhooks_due', '');
  end if;
  return null;
end
$$;
