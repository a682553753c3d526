-- tenant.suspended (issue 23): nothing in the program suspends a workspace (operators set
-- tenants.status), so the event is written by a trigger on that change, in the operator's own
-- transaction: the event exists if and only if the suspension commits. It is recorded as
-- src/webhooks/outbox.repo.ts (emitEvents) records every event: the same body {id, type,
-- created_at, tenant_id, data}, and one pending delivery per enabled endpoint subscribed to it.
-- The id is evt_ + 32 hex characters without pgcrypto (PGlite has none): an md5 of a random
-- value and the clock. A suspension that made a delivery wakes the workers at commit, as every
-- other emit does (NOTIFY parley_webhooks_due).
create function webhook_tenant_suspended() returns trigger language plpgsql as $$
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

-- Once per suspension: an update that leaves a suspended workspace suspended sends nothing.
create trigger tenants_suspended_event after update of status on tenants
  for each row when (new.status = 'suspended' and old.status is distinct from 'suspended')
  execute function webhook_tenant_suspended();
