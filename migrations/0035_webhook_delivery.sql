-- Webhook delivery (runtime/webhook-delivery.ts) and retention (src/webhooks/retention.sweeper.ts):
-- the sweeper finds events past 30 days by their age across every workspace, which the per-tenant
-- index of 0032 cannot serve.
create index webhook_events_created_idx on webhook_events (created_at);
