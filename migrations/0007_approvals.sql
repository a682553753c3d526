-- Approvals decided through an API key record the key (decided_by names users only), and
-- "resolved since" polling reads approvals by decision time.
alter table approvals add column decided_by_api_key_id bigint references api_keys (id);
create index approvals_decided_idx on approvals (tenant_id, decided_at) where decided_at is not null;
