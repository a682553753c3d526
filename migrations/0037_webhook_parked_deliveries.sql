-- Deliveries to an endpoint that is disabled or deleted are parked (next_attempt_at null), so the
-- due index of 0032 holds only what the delivery worker may send: a backlog behind a disabled
-- endpoint is no longer scanned past on every poll. Enabling the endpoint makes its parked
-- deliveries due at once and wakes the workers (the NOTIFY goes out at commit). A trigger, so the
-- user's PATCH, the platform's 5-day disable, a delete and an operator's own SQL all park alike.
create function webhook_endpoint_parking() returns trigger language plpgsql as $$
begin
  if (new.enabled and new.deleted_at is null) is not distinct from (old.enabled and old.deleted_at is null) then
    return null;
  end if;
  if new.enabled and new.deleted_at is null then
    update webhook_deliveries set next_attempt_at = now()
    where endpoint_id = new.id and status = 'pending' and next_attempt_at is null;
    perform pg_notify('parley_webhooks_due', '');
  else
    update webhook_deliveries set next_attempt_at = null
    where endpoint_id = new.id and status = 'pending' and next_attempt_at is not null;
  end if;
  return null;
end
$$;

create trigger webhook_endpoints_parking after update of enabled, deleted_at on webhook_endpoints
  for each row execute function webhook_endpoint_parking();

-- What already waits behind a disabled or deleted endpoint.
update webhook_deliveries d set next_attempt_at = null
from webhook_endpoints ep
where ep.id = d.endpoint_id and d.status = 'pending' and d.next_attempt_at is not null
  and not (ep.enabled and ep.deleted_at is null);
