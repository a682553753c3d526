-- Every commit that changes what a workspace's cached list reads say (workflows, runs and their
-- targets, calls and their turns, approvals, the wallet and its ledger, analyses, members' names,
-- audience names, the workspace itself) tells the api processes which workspaces changed: one
-- NOTIFY on parley_reads per statement, with the workspace ids joined by commas ('*' when too many
-- for a payload), sent when the transaction commits (src/platform/workspace-reads.ts). Postgres
-- folds identical payloads of one transaction into one notification.

-- TG_ARGV[0]: the column holding the workspace id (tenant_id; the tenants table's own id);
-- TG_ARGV[1]: the statement's transition table (new_rows, or old_rows for a delete).
create function parley_reads_changed() returns trigger language plpgsql as $$
declare ids text;
begin
  execute format('select string_agg(distinct %I::text, '','') from %I', tg_argv[0], tg_argv[1]) into ids;
  if ids is not null then
    perform pg_notify('parley_reads', case when length(ids) > 7000 then '*' else ids end);
  end if;
  return null;
end $$;

do $$
declare
  t record;
  run text := 'for each statement execute function parley_reads_changed(%L, %L)';
begin
  for t in select * from (values
    ('workflows', 'tenant_id'), ('runs', 'tenant_id'), ('run_targets', 'tenant_id'), ('calls', 'tenant_id'),
    ('turns', 'tenant_id'), ('approvals', 'tenant_id'), ('wallets', 'tenant_id'), ('ledger_entries', 'tenant_id'),
    ('call_analyses', 'tenant_id'), ('users', 'tenant_id'), ('audience_targets', 'tenant_id'), ('tenants', 'id')
  ) as x(tab, col) loop
    execute format('create trigger %I after insert on %I referencing new table as new_rows ' || run,
      t.tab || '_reads_ins', t.tab, t.col, 'new_rows');
    execute format('create trigger %I after update on %I referencing new table as new_rows ' || run,
      t.tab || '_reads_upd', t.tab, t.col, 'new_rows');
    execute format('create trigger %I after delete on %I referencing old table as old_rows ' || run,
      t.tab || '_reads_del', t.tab, t.col, 'old_rows');
  end loop;
end $$;
